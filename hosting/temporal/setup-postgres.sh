#!/bin/sh
# Creates Temporal's two databases on the Postgres of hosting/docker-compose.production.yml and brings
# their schemas to the version of the admin-tools image (the server's release). Every step is
# idempotent (the database is created only when missing, the version tables only when missing, and
# update-schema applies only the versions not applied yet), so this runs on every `up`, and after an
# upgrade of the images it is what upgrades the schemas.
set -eu
: "${POSTGRES_SEEDS:?POSTGRES_SEEDS is required}"
: "${POSTGRES_USER:?POSTGRES_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
PORT="${DB_PORT:-5432}"
SCHEMAS=/etc/temporal/schema/postgresql/v12

nc -z -w 10 "$POSTGRES_SEEDS" "$PORT"
for db in temporal temporal_visibility; do
  case "$db" in
    temporal) versioned="$SCHEMAS/temporal/versioned" ;;
    *) versioned="$SCHEMAS/visibility/versioned" ;;
  esac
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$PORT" -u "$POSTGRES_USER" --db "$db" create
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$PORT" -u "$POSTGRES_USER" --db "$db" setup-schema -v 0.0
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$PORT" -u "$POSTGRES_USER" --db "$db" update-schema -d "$versioned"
done
echo "Temporal's schemas are up to date"
