import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { NODE_FLAGS, ROLES } from '../../src/main.js';
import { repoPath } from '../../src/repo-files.js';

/**
 * The platform's V8 flags are NODE_FLAGS (src/main.ts); the places that start a platform process
 * from a shell carry them literally, and must not drift from it.
 */
describe('V8 flags of the platform processes (NODE_FLAGS)', () => {
  const flags = NODE_FLAGS.join(' ');

  it('every Procfile role starts node with NODE_FLAGS', () => {
    const lines = readFileSync(repoPath('Procfile'), 'utf8').trim().split('\n');
    expect(lines.map((l) => l.split(':')[0])).to.deep.equal([...ROLES]);
    for (const l of lines) expect(l, l).to.match(new RegExp(`^\\w+: node ${flags} dist/src/main\\.js \\w+$`));
  });

  it('npm start (scripts/start.sh) starts node with NODE_FLAGS', () => {
    const start = readFileSync(repoPath('scripts/start.sh'), 'utf8');
    expect(start).to.contain(`exec node ${flags} dist/src/main.js "$@"`);
  });

  it('are flags node takes', () => {
    for (const f of NODE_FLAGS) expect(process.allowedNodeEnvironmentFlags.has(f.split('=')[0]), f).to.equal(true);
  });
});
