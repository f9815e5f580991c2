/**
 * The shapes of bulk import and export (CONTRACT §16), and the one step between them: an export
 * line turned into the create line that makes the same content (aspects, aliases, metadata,
 * views) on another platform.
 *
 * @example
 * // export > file, then, for every line of the file:
 * const create = exportLineToCreate(JSON.parse(line));
 * // ... sent as one line of POST {base_url}/bulk
 */

/** The views the system maintains (never assigned by a write). */
const SYSTEM_VIEWS = ['svcLatest'];
const MAIN_NAMESPACE = 'contentid';

/** One line of GET {base_url}/export. */
export interface ExportLine {
  id: string;
  version: string;
  /** Every alias, `<namespace>/<alias>`, the main alias (`contentid/<key>`) first. */
  aliases: string[];
  /** The views that hold the current version. */
  views: string[];
  /** The content's unversioned metadata aspects (svcSecurityContext, svcTimeState, ...). */
  metadata?: Record<string, Record<string, unknown>>;
  /** The envelope as a read answers it. */
  content: { system: { contentType: string; [k: string]: unknown }; aspects: Record<string, unknown>; [k: string]: unknown };
}

/** One line of POST {base_url}/bulk. */
export type BulkLine =
  | { op: 'create'; content: unknown }
  | { op: 'update'; id: string; ifMatch?: string; mode?: 'update' | 'replace' | 'merge'; content: unknown }
  | { op: 'delete'; id: string; ifMatch?: string };

/** One answer line of POST {base_url}/bulk. */
export interface BulkAnswer {
  line: number;
  status: number;
  id?: string;
  version?: string;
  etag?: string;
  subResults?: unknown[];
  error?: { message: string; statusCode: string; extraInfo: Record<string, unknown> };
}

/**
 * The create line that reproduces an exported content: its aspects, its aliases (all but the
 * main one, which the new platform generates), its metadata aspects, and the views besides the
 * system's that hold its current version.
 */
export function exportLineToCreate(e: ExportLine): BulkLine {
  const operations: Record<string, unknown>[] = [];
  for (const a of e.aliases) {
    const i = a.indexOf('/');
    const namespace = a.slice(0, i);
    if (i > 0 && namespace !== MAIN_NAMESPACE) operations.push({ _type: 'svcSetAlias', namespace, alias: a.slice(i + 1) });
  }
  if (e.metadata && Object.keys(e.metadata).length) operations.push({ _type: 'svcContentMetadata', aspects: e.metadata });
  const views = e.views.filter((v) => !SYSTEM_VIEWS.includes(v));
  if (views.length) operations.push({ _type: 'svcAssignToViews', views });
  return {
    op: 'create',
    content: { system: { contentType: e.content.system.contentType }, aspects: e.content.aspects, ...(operations.length ? { operations } : {}) },
  };
}

/** What `bulkImport` and `exportContents` need of a client: its request method (PlatformClient has it). */
export interface BulkRequester {
  req(method: string, path: string, opts: { raw?: string; headers?: Record<string, string> }): Promise<{ status: number; text: string }>;
}

const ndjson = <T>(text: string): T[] =>
  text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);

/**
 * POST {base_url}/bulk with `lines`, sent and answered in one piece (for batches that fit in
 * memory; stream bigger ones, e.g. with src/bulk-cli.ts). Throws for an answer other than 200.
 *
 * @example
 * const answers = await bulkImport(client, [{ op: 'create', content: { system: { contentType: 'article' }, aspects: {} } }]);
 */
export async function bulkImport(client: BulkRequester, lines: BulkLine[]): Promise<BulkAnswer[]> {
  const r = await client.req('POST', '/bulk', {
    raw: lines.map((l) => `${JSON.stringify(l)}\n`).join(''),
    headers: { 'Content-Type': 'application/x-ndjson' },
  });
  if (r.status !== 200) throw new Error(`bulk import refused: ${r.status} ${r.text}`);
  return ndjson<BulkAnswer>(r.text);
}

/** GET {base_url}/export, whole (for exports that fit in memory). Throws for an answer other than 200. */
export async function exportContents(client: BulkRequester, filter: { types?: string[]; views?: string[] } = {}): Promise<ExportLine[]> {
  const q = new URLSearchParams();
  if (filter.types?.length) q.set('types', filter.types.join(','));
  if (filter.views?.length) q.set('views', filter.views.join(','));
  const r = await client.req('GET', `/export${q.size ? `?${q}` : ''}`, {});
  if (r.status !== 200) throw new Error(`export refused: ${r.status} ${r.text}`);
  return ndjson<ExportLine>(r.text);
}
