import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A path of this repository (`repoPath('tools', 'solr', 'pom.xml')`), found from this module
 * whether it runs from src/ (tsx) or from dist/src/ (built): Lua scripts, configsets and the
 * local servers' build files stay where the repository keeps them.
 */
export function repoPath(...parts: string[]): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++, dir = dirname(dir)) {
    const candidate = join(dir, ...parts);
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`${join(...parts)} not found in this repository`);
}
