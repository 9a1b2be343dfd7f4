#!/usr/bin/env python3
"""Regenerates the newest update script, sql/seen_bloom--0.4.0--0.5.0.sql: its hand-written head
(everything before the marker line), then the whole current tracking functions (sql/tracking.sql
from the marker on, sql/citus.sql and sql/activity.sql, with CREATE FUNCTION / PROCEDURE / VIEW
made CREATE OR REPLACE, and the statements that cannot be repeated left out: the triggers and
event triggers that the released version made already), then its hand-written tail (from the
end marker on). Run it after editing any of those files; tests/integration/upgrade.sh checks
the result against a fresh install. Scripts of released updates are never regenerated."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
marker = "-- Helpers the generated triggers call."
end_marker = "-- End of the generated part."
upgrade = root / "sql" / "seen_bloom--0.4.0--0.5.0.sql"
text = upgrade.read_text()
head = text[: text.index(marker)]
tail = text[text.index(end_marker):]
tracking = (root / "sql" / "tracking.sql").read_text()
body = tracking[tracking.index(marker):]
for extra in ("citus.sql", "activity.sql"):
    body += "\n" + (root / "sql" / extra).read_text()
# Made by the released version already, and not replaceable: left out.
body = re.sub(r"^CREATE (EVENT )?TRIGGER .*?;\n", "", body, flags=re.M | re.S)
body = re.sub(r"^ALTER TABLE seen_bloom\.tracked ENABLE ALWAYS TRIGGER .*?;\n", "", body, flags=re.M)
body = re.sub(r"^CREATE (FUNCTION|PROCEDURE|VIEW)", r"CREATE OR REPLACE \1", body, flags=re.M)
upgrade.write_text(head + body + "\n" + tail)
