/** Polls `check` until it is true; fails after `ms` naming `what`. */
export async function until(check: () => Promise<boolean>, ms: number, what = 'a condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Retries an assertion until it passes or `ms` run out (then its last failure is thrown). */
export async function eventually<T>(check: () => Promise<T>, ms = 4000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > end) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Polls `check` until it answers a value (not null, undefined or false) and answers it; fails after `ms` naming `what`. */
export async function valueWithin<T>(check: () => Promise<T | null | undefined | false>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
