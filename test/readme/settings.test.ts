import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { settingsSchema } from '../../config/settings.js';
import { repoPath } from '../../src/repo-files.js';

/**
 * The README's settings table names every setting of config/settings.ts, with the default the
 * schema gives (— for none), and names nothing else: a setting added without a row fails here.
 */
describe('README settings table', () => {
  const readme = readFileSync(repoPath('README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Settings\n'), readme.indexOf('\n## ', readme.indexOf('\n## Settings\n') + 1));
  const rows = new Map<string, string>();
  for (const m of section.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]+) \|/gm)) rows.set(m[1], m[2].trim());
  const defaults = settingsSchema.parse({}) as Record<string, unknown>;

  it('has one row per setting, and no row for anything else', () => {
    expect([...rows.keys()].sort()).to.deep.equal(Object.keys(settingsSchema.shape).sort());
  });

  it('gives each setting the default of the schema', () => {
    for (const name of Object.keys(settingsSchema.shape)) {
      const d = defaults[name];
      const expected = d === undefined ? '—' : `\`${Array.isArray(d) ? d.join(',') : String(d)}\``;
      expect(rows.get(name), name).to.equal(expected);
    }
  });
});
