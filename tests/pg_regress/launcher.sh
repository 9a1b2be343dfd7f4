#!/bin/sh
# pg_regress runs psql through this: terse errors, no NOTICE noise.
export PGOPTIONS='-c client_min_messages=warning'
exec "$@" -v VERBOSITY=terse
