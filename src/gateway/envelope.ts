import {
  draftVersionId,
  etagOf,
  isoTime,
  MAP_KEY_RESERVED,
  mainAlias,
  versionId,
  MAIN_NAMESPACE,
  type Aspects,
  type Draft,
  type Json,
  type Snapshot,
  type VersionIndexEntry,
  type VersionRecord,
  type ViewEvent,
} from '../content/model.js';
import type { SubResult } from '../actors/content/content-actor.js';
import { AppError } from '../errors.js';
import { viewsOfVersion } from '../content/views.js';

/** The spec's status object. */
export interface Status {
  message: string;
  statusCode: string;
  extraInfo: Record<string, unknown>;
  subResults?: SubResult[];
}

export const STATUS_OK: Status = { message: 'OK', statusCode: '20000', extraInfo: {} };
export const STATUS_CREATED: Status = { message: 'CREATED', statusCode: '20100', extraInfo: {} };
export const partialCreated = (subResults: SubResult[]): Status => ({ message: 'PARTIAL_CREATED', statusCode: '20107', extraInfo: {}, subResults });

/** The response formats of the `format` query parameter and their `Accept` equivalents. */
export const FORMATS = ['json', 'json+pretty', 'json+allTypes'] as const;
export type Format = (typeof FORMATS)[number];

export function formatOf(format: string | null, accept: string | undefined): Format {
  if (format) {
    if ((FORMATS as readonly string[]).includes(format)) return format as Format;
    throw new AppError('BAD_REQUEST', `Unknown format '${format}': use json, json+pretty or json+allTypes`);
  }
  if (accept) {
    const a = accept.replace(/\s+/g, '').toLowerCase();
    if (a.includes('application/json;pretty=true')) return 'json+pretty';
    if (a.includes('application/json;alltypes=true')) return 'json+allTypes';
  }
  return 'json';
}

/**
 * The header of every answer whose format `Accept` may select (`formatOf`): a cache in front of
 * the gateway keeps the pretty and the plain answer apart (RFC 9110 §12.5.5).
 */
export const VARY_ACCEPT: [string, string] = ['Vary', 'Accept'];

/**
 * Most characters `json+pretty` may add to an answer (line breaks and indentation); past it the
 * answer is plain JSON (the same value; a pretty answer is for people, who read far less). Each
 * value is indented two spaces a level, so content whose values sit deep grew up to about 64
 * times (MAX_BODY_DEPTH): a sportseditor's article of 2.5 million numbers under 58 maps (5 MB)
 * answered a reader 317.5 MB in 6.1 s, 4.4 million (8.8 MB) 500, past V8's longest string (the
 * twenty-third session's review).
 */
export const PRETTY_MAX_ADDED_CHARS = 16 * 1024 * 1024;

/** What JSON.stringify(v, null, 2) adds to JSON.stringify(v) at `depth`, counted up to past `left`. */
export function prettyAdds(v: unknown, depth: number, left: number): number {
  if (v === null || typeof v !== 'object') return 0;
  const items = Array.isArray(v) ? v : Object.values(v);
  if (!items.length) return 0;
  // Each item: a line break and its indentation (and ': ' for ':' in a map); the closing bracket's line.
  let added = items.length * (1 + 2 * (depth + 1) + (Array.isArray(v) ? 0 : 1)) + 1 + 2 * depth;
  for (const item of items) {
    if (added > left) return added;
    added += prettyAdds(item, depth + 1, left - added);
  }
  return added;
}

/** Serialises a response body in the requested format. */
export function serialize(value: unknown, format: Format): string {
  if (format === 'json+pretty')
    return prettyAdds(value, 0, PRETTY_MAX_ADDED_CHARS) > PRETTY_MAX_ADDED_CHARS ? JSON.stringify(value) : JSON.stringify(value, null, 2);
  if (format === 'json+allTypes') return JSON.stringify(withAllTypes(value as Json).out);
  return JSON.stringify(value);
}

/** The one type of a container's values (`long`, `MAP::string`, ...), `any` when they differ or there are none. */
function commonType(names: string[]): string {
  const first = names[0];
  return first !== undefined && names.every((n) => n === first) ? first : 'any';
}

/**
 * json+allTypes: every map carries its `_type` marker. The value with its markers and its type
 * name (`MAP::string`, `LIST::long`, the `_type` a map holds as a string, ...) are made in one walk:
 * each map's marker names the common type of its values, whose names the walk below it made
 * already. Before (the twenty-third session's review), each map's marker walked its whole
 * subtree again, so a value cost as many walks as it had maps above it: a sportseditor's article
 * of 2.5 million numbers under 58 nested maps (5 MB) made one reader's `?format=json+allTypes`
 * hold the event loop 5.2 s (the same numbers under one map: 16 ms).
 */
function withAllTypes(v: Json): { out: Json; type: string } {
  if (Array.isArray(v)) {
    const out: Json[] = new Array(v.length);
    const names: string[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const t = withAllTypes(v[i]);
      out[i] = t.out;
      names[i] = t.type;
    }
    return { out, type: `LIST::${commonType(names)}` };
  }
  if (v && typeof v === 'object') {
    const out: { [k: string]: Json } = {};
    const names: string[] = [];
    for (const [k, x] of Object.entries(v)) {
      const t = withAllTypes(x);
      out[k] = t.out;
      if (k !== '_type') names.push(t.type);
    }
    const type = typeof v._type === 'string' ? v._type : `MAP::${commonType(names)}`;
    // A `_type` the content holds is its own, whatever its value: only a map without one gets the marker.
    if (!Object.hasOwn(out, '_type')) out._type = type;
    return { out, type };
  }
  if (v === null) return { out: v, type: 'null' };
  if (typeof v === 'number') return { out: v, type: Number.isInteger(v) ? 'long' : 'double' };
  return { out: v, type: typeof v };
}

/** The aspects map of a response: it carries the content type, each aspect its own type. */
function aspectsOut(type: string, aspects: Aspects): Record<string, unknown> {
  const out: Record<string, unknown> = { _type: type };
  // An aspect that names its type is answered as stored (the same JSON as a copy, without the copy).
  for (const [name, a] of Object.entries(aspects)) out[name] = a._type === undefined ? { ...a, _type: name } : a;
  return out;
}

/** The content envelope of a version. */
export function contentEnvelope(snapshot: Snapshot, version: VersionRecord, status: Status = STATUS_OK): Record<string, unknown> {
  return {
    system: {
      id: mainAlias(snapshot.cid),
      version: versionId(snapshot.cid, version.key),
      creationTime: isoTime(snapshot.created),
      modificationTime: isoTime(version.created),
      contentType: version.type,
    },
    aspects: aspectsOut(version.type, version.aspects),
    status,
  };
}

/** The envelope of a workspace draft: version `draft:<cid>:WORKSPACE-<ws>`, its pending operations. */
export function draftEnvelope(draft: Draft, head: Snapshot | null, status: Status = STATUS_OK, aspects: Aspects = draft.aspects): Record<string, unknown> {
  return {
    system: {
      id: mainAlias(draft.cid),
      version: draftVersionId(draft.cid, draft.workspace),
      creationTime: isoTime(head && !head.deleted ? head.created : draft.created),
      modificationTime: isoTime(draft.modified),
      contentType: draft.type,
    },
    aspects: aspectsOut(draft.type, aspects),
    operations: draft.ops,
    status,
  };
}

/**
 * The metadata response (content type `_contentInfo`) of a content at a revision; `viewEvents`:
 * its view history up to the snapshot's revision (`ContentStore.viewHistory`).
 */
export function metadataEnvelope(snapshot: Snapshot, viewEvents: ViewEvent[]): Record<string, unknown> {
  // Maps keyed by names: built as Maps (so `constructor` is a name like any other), written after
  // the `_type` marker, which no namespace or view may be (model.ts MAP_KEY_RESERVED).
  const byNamespace = new Map<string, string[]>([[MAIN_NAMESPACE, [snapshot.cid]]]);
  for (const full of snapshot.aliases) {
    const i = full.indexOf('/');
    const ns = full.slice(0, i);
    const list = byNamespace.get(ns);
    if (list) list.push(full.slice(i + 1));
    else byNamespace.set(ns, [full.slice(i + 1)]);
  }
  const byView = new Map<string, unknown[]>();
  for (const e of viewEvents) {
    const event = { _type: 'svcViewEvent', userId: e.userId, version: e.version, revision: e.rev, timestamp: isoTime(e.ts) };
    const history = byView.get(e.view);
    if (history) history.push(event);
    else byView.set(e.view, [event]);
  }
  const aliases = markedMap('MAP::LIST::string', byNamespace, (list) => list);
  const views = markedMap('MAP::svcViewInfoEntry', byView, (history) => ({ _type: 'svcViewInfoEntry', history }));
  const meta: Record<string, unknown> = {};
  for (const [name, a] of Object.entries(snapshot.meta)) if (!MAP_KEY_RESERVED.has(name)) meta[name] = { ...a, _type: a._type ?? name };
  return {
    system: {
      id: mainAlias(snapshot.cid),
      version: versionId(snapshot.cid, snapshot.head),
      creationTime: isoTime(snapshot.created),
      modificationTime: isoTime(snapshot.modified),
      contentType: '_contentInfo',
    },
    aspects: {
      _type: '_contentInfo',
      ...meta,
      svcWorkflowState: { _type: 'svcWorkflowState', workflows: [] },
      svcContentState: { _type: 'svcContentState', hidden: snapshot.meta.svcContentState?.hidden === true },
      svcAliases: { _type: 'svcAliases', aliases },
      svcViewInfo: { _type: 'svcViewInfo', views },
    },
    status: STATUS_OK,
  };
}

/** A typed map of the answers (`{_type, name: value, ...}`) from names. */
function markedMap<T>(type: string, entries: Map<string, T>, value: (t: T) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = { _type: type };
  // A reserved name stored before such names were refused (MAP_KEY_RESERVED) is left out.
  for (const [name, t] of entries) if (!MAP_KEY_RESERVED.has(name)) out[name] = value(t);
  return out;
}

/**
 * The history response of a content at a revision: each version once, with its first revision;
 * `index`: its history up to the snapshot's revision (`ContentStore.versionIndex`).
 */
export function historyBody(snapshot: Snapshot, index: VersionIndexEntry[]): Record<string, unknown> {
  return {
    versions: index.map((e) => ({
      version: versionId(snapshot.cid, e.key),
      revision: { contentId: snapshot.cid, revisionNumber: e.rev },
      creationTime: e.created,
      creatorId: e.creator,
      views: viewsOfVersion(snapshot, e.key),
      ...(e.restoredFrom === undefined ? {} : { restoredFrom: versionId(snapshot.cid, e.restoredFrom) }),
    })),
  };
}

export { etagOf };
