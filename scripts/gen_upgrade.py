#!/usr/bin/env python3
"""Regenerates sql/seen_bloom--0.3.0--0.4.0.sql: its hand-written head (everything before the
marker line) and then the whole current tracking functions, sql/tracking.sql from the marker
on, sql/citus.sql and sql/activity.sql, with CREATE FUNCTION / PROCEDURE made CREATE OR REPLACE. Run it after
editing either file; tests/integration/upgrade.sh checks the result against a fresh install."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
marker = "-- Helpers the generated triggers call."
upgrade = root / "sql" / "seen_bloom--0.3.0--0.4.0.sql"
head = upgrade.read_text()
head = head[: head.index(marker)]
tracking = (root / "sql" / "tracking.sql").read_text()
body = tracking[tracking.index(marker):]
for extra in ("citus.sql", "activity.sql"):
    body += "\n" + (root / "sql" / extra).read_text()
body = re.sub(r"^CREATE (FUNCTION|PROCEDURE)", r"CREATE OR REPLACE \1", body, flags=re.M)
upgrade.write_text(head + body)
