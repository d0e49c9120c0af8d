/**
 * A local activity's input, marked as one (issue 31, pages of 1000). Temporal never stores a local
 * activity's input: it goes from the workflow thread to Core and back to the activity in the same
 * worker process, and only the step's result is recorded (its marker). The claim check exists to keep
 * payloads out of histories, so it leaves a payload carrying this mark inline instead of writing it to
 * payload_blobs (an `INSERT` of each ~100 KB `batchSave` batch that nothing ever read). The encryption
 * codec still encrypts it, as every payload, and keeps the mark outside the ciphertext for the claim
 * check to see. Only workflow code builds such payloads (a RawValue cannot cross into a script's realm,
 * which sees JSON only), and only for a local activity's arguments (workflows/svc.ts): an ordinary
 * activity's input is in its history and is claim-checked as before. Workflow-safe: no Node imports.
 */
import { RawValue, type Payload } from '@temporalio/common';

/** Payload metadata key of a local activity's input; its value is LOCAL_INPUT_VALUE. */
export const LOCAL_INPUT_KEY = 'service-local-input';
const LOCAL_INPUT_VALUE = 'true';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The argument as the payload the default JSON converter would make (`json/plain`, its JSON text),
 * plus the mark. Undefined stays undefined (the converter's own `binary/null`).
 */
export function localActivityInput(value: unknown): unknown {
  if (value === undefined) return value;
  const payload: Payload = {
    metadata: { encoding: encoder.encode('json/plain'), [LOCAL_INPUT_KEY]: encoder.encode(LOCAL_INPUT_VALUE) },
    data: encoder.encode(JSON.stringify(value)),
  };
  // RawValue bypasses the payload converter (the SDK's own escape hatch); the codecs still see it.
  return RawValue.fromPayload(payload);
}

export function isLocalActivityInput(payload: Payload): boolean {
  const mark = payload.metadata?.[LOCAL_INPUT_KEY];
  return mark !== undefined && mark !== null && decoder.decode(mark) === LOCAL_INPUT_VALUE;
}

/**
 * A value its caller already serialized as JSON, as the payload the default JSON converter would make
 * of it (`json/plain`, that text): the same bytes, without serializing it again. An activity returns it
 * so that a result it had to serialize anyway (a request's answer, for the step ledger) is serialized
 * once (activities/runtime.ts).
 */
export function serializedJson(json: string): unknown {
  return RawValue.fromPayload({ metadata: { encoding: encoder.encode('json/plain') }, data: encoder.encode(json) });
}

/** The mark alone, for the metadata of the encrypted payload (the mark says nothing of the content). */
export function localInputMark(): Record<string, Uint8Array> {
  return { [LOCAL_INPUT_KEY]: encoder.encode(LOCAL_INPUT_VALUE) };
}
