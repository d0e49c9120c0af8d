/**
 * What a call the test expects to fail is rejected with, as `pick` reads it; an error `pick` does not
 * know (undefined) is thrown again, and a call that succeeds fails the test.
 */
export async function rejection<T>(
  call: Promise<unknown>,
  pick: (error: unknown) => T | undefined,
  expected = 'an error',
): Promise<T> {
  try {
    await call;
  } catch (error) {
    const picked = pick(error);
    if (picked === undefined) throw error;
    return picked;
  }
  throw new Error(`the call succeeded; ${expected} was expected`);
}
