import { readFileSync } from 'node:fs';
import { type NamedRenditions, parseRenditionsConfig } from '../src/content/renditions.js';
import { repoPath } from '../src/repo-files.js';

/** Reads config/renditions.json (or `path`) and checks it: the named renditions of CONTRACT §17. */
export function loadRenditionsConfig(path?: string): NamedRenditions {
  const file = path ?? repoPath('config', 'renditions.json');
  return parseRenditionsConfig(JSON.parse(readFileSync(file, 'utf8')), file);
}
