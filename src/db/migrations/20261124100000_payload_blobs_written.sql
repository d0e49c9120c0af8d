-- payload_blobs.last_written_at is moved by the claim check's own write (ON CONFLICT (hash) DO UPDATE,
-- src/runtime/payloadStorage.ts) instead of a trigger that ran an extra UPDATE before every insert.
DROP TRIGGER payload_blobs_written ON payload_blobs;
DROP FUNCTION payload_blobs_written();
