import { readFileSync } from 'node:fs';
import { parseVariantsConfig, type VariantsConfig } from '../src/content/variants.js';
import { repoPath } from '../src/repo-files.js';

/** Reads config/variants.json (or `path`) and checks it. */
export function loadVariantsConfig(path?: string): VariantsConfig {
  const file = path ?? repoPath('config', 'variants.json');
  return parseVariantsConfig(JSON.parse(readFileSync(file, 'utf8')), file);
}
