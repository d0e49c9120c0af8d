#!/bin/sh
# Creates the namespace the service uses (TEMPORAL_NAMESPACE of the api and worker) once the server
# answers; does nothing when it exists. Retention: how long Temporal keeps a closed run's history.
set -eu
: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
NAMESPACE="${NAMESPACE:-default}"
RETENTION="${RETENTION:-72h}"

attempt=1
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  if [ "$attempt" -ge 60 ]; then
    echo "Temporal at $TEMPORAL_ADDRESS did not become healthy in 5 minutes" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 5
done
if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" >/dev/null 2>&1; then
  echo "namespace $NAMESPACE exists"
else
  temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" --retention "$RETENTION"
  echo "namespace $NAMESPACE created"
fi
