import { spawnSync } from 'node:child_process';

let built = false;

/**
 * Builds dist/ with tsc (a few seconds), once per test process, for tests that run the
 * platform's processes as production does (`node dist/src/main.js <role>`), without tsx.
 */
export function buildDist(): void {
  if (built) return;
  const r = spawnSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc failed:\n${r.stdout}\n${r.stderr}`);
  built = true;
}
