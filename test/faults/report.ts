import { mkdirSync, writeFileSync } from 'node:fs';

/**
 * The figures of a fault run: printed, and written to .cache/faults/<name>.json, from which
 * RELIABILITY.md is updated by hand after a run (`npm run test:faults`).
 */
export function report(name: string, figures: Record<string, unknown>): void {
  console.log(`      ${name}: ${JSON.stringify(figures)}`);
  mkdirSync('.cache/faults', { recursive: true });
  writeFileSync(`.cache/faults/${name}.json`, `${JSON.stringify({ at: new Date().toISOString(), ...figures }, null, 2)}\n`);
}
