/** The stored shape of content. Stored as msgpack; rendered as the spec's JSON at the gateway. */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Aspect = { _type?: string; [field: string]: Json | undefined };
export type Aspects = Record<string, Aspect>;

/** One immutable version of a content (`vr:{p}:<cid>` under its version key). */
export interface VersionRecord {
  key: string;
  type: string;
  aspects: Aspects;
  /** Creation time of this version, epoch ms. */
  created: number;
  creator: string;
  /** First revision in which this version appeared. */
  rev: number;
  /** The version key this version restored (CONTRACT §15 Restore); absent on any other write. */
  restoredFrom?: string;
}

/**
 * The state of a content at one revision: which version is its head, which views hold which
 * version, its unversioned metadata aspects and aliases. One is kept per revision, so that a
 * read of a revision shows the content as it was then.
 */
export interface Snapshot {
  cid: string;
  rev: number;
  type: string;
  head: string;
  /** Creation time of the first version, epoch ms. */
  created: number;
  /** Time of this revision, epoch ms. */
  modified: number;
  committer: string;
  deleted: boolean;
  /** View name -> version key. */
  views: Record<string, string>;
  /** Symbolic view name -> target view name (without `@`). */
  symbolic: Record<string, string>;
  /** Unversioned metadata aspects (svcTimeState, svcSecurityContext, svcContentState, ...). */
  meta: Aspects;
  /** Aliases besides the main one, as `namespace/alias`. */
  aliases: string[];
  /**
   * The command whose commit wrote this revision: a retry of a command whose commit took place
   * but whose answer was lost finds it here (see ContentActor.resumeApplied).
   */
  cmd?: string;
}

/** An entry of the version index, the source of the history response. */
export interface VersionIndexEntry {
  key: string;
  rev: number;
  created: number;
  creator: string;
  /** The version key this version restored; absent on any other write. */
  restoredFrom?: string;
}

/** One view assignment, the source of svcViewInfo. */
export interface ViewEvent {
  view: string;
  userId: string;
  version: string;
  rev: number;
  ts: number;
}

/**
 * The draft of one content in one workspace (`dr:{p}:<cid>` under the workspace name).
 * Its operations are pending: they run on promote.
 */
export interface Draft {
  workspace: string;
  cid: string;
  type: string;
  /** The draft's aspects as they read on the workspace. */
  aspects: Aspects;
  /** Pending operations (run on promote). */
  ops: unknown[];
  /** Aliases this draft reserves, as `namespace/alias`. */
  reserved: string[];
  /** True when the content exists only on the workspace (the draft arose from a create). */
  fromCreate: boolean;
  /** ETag of main that the promote is checked against (drafts of an update). */
  origin?: string;
  mode: 'update' | 'replace';
  created: number;
  modified: number;
  creator: string;
}

/**
 * What a promote needs of a draft before it reads it, kept in the draft's summary by the script
 * that writes the draft (ContentStore.commitDraft): whether it arose from a create, the ETag of
 * main it was made from (null: none), and whether its operations may need AssignToView
 * (`mayNeedAssignToView`). A promote of a draft over main whose origin no longer names main's
 * head is refused 409 from this and the head alone, the draft never read (Workspaces.promote,
 * WorkspaceService.promote).
 */
export interface DraftOrigin {
  fromCreate: boolean;
  origin: string | null;
  views: boolean;
}

/** The version id of a draft: `draft:<cid>:WORKSPACE-<workspace>`. */
export const draftVersionId = (cid: string, workspace: string): string => `draft:${cid}:WORKSPACE-${workspace}`;

/** The event appended to the partition's event stream by every commit. */
export interface ContentEvent {
  kind: 'created' | 'updated' | 'deleted' | 'views' | 'metadata' | 'aliases';
  cid: string;
  rev: number;
  type: string;
  version?: string;
  ts: number;
  userId: string;
  requestId?: string;
  /** How the write came (audit, CONTRACT §15); absent means `main` (and on events stored before it was recorded). */
  via?: WriteVia;
}

/** How a main write came: the content API, a workspace promote, a bulk import line, a restore. */
export type WriteVia = 'main' | 'promote' | 'bulk' | 'restore';

export const MAIN_NAMESPACE = 'contentid';
/** The namespace of taxonomy definitions (`_taxonomy/<id>`). */
export const TAXONOMY_NAMESPACE = '_taxonomy';
export const LATEST_VIEW = 'svcLatest';
/**
 * Names that become keys of the maps of the metadata answer (alias namespaces in svcAliases,
 * views in svcViewInfo, metadata aspects in its aspects) and may not be `_type`, those maps'
 * marker, or `__proto__`, which does not survive the codec. The gateway refuses them in
 * requests; the actor in operations it replays (a draft saved before they were refused).
 */
export const MAP_KEY_RESERVED: ReadonlySet<string> = new Set(['_type', '__proto__']);

export const mainAlias = (cid: string): string => `${MAIN_NAMESPACE}/${cid}`;
export const versionId = (cid: string, versionKey: string): string => `c:${cid}:${versionKey}`;
export const etagOf = (cid: string, rev: number): string => `W/"${cid}/${rev}"`;
/** The head of content that exists in main: null when there is none or it was deleted. */
export const liveHeadOf = (head: Snapshot | null): Snapshot | null => (head && !head.deleted ? head : null);

/** Parses a `c:<cid>:<vk>` version id. */
export function parseVersionId(id: string): { cid: string; key: string } | null {
  const m = /^c:([^:/]+):([^:/]+)$/.exec(id);
  return m ? { cid: m[1], key: m[2] } : null;
}

/** The contexts of a content: the owners of its svcSecurityContext aspect. */
export function contextsOf(meta: Aspects): string[] {
  const owners = meta.svcSecurityContext?.owners;
  return Array.isArray(owners) ? owners.filter((o): o is string => typeof o === 'string') : [];
}

/** The form of an If-Match value, as error messages name it: the ETag of a read or of the last write. */
export const IF_MATCH_FORM = 'W/"<content key>/<revision>"';

/**
 * Is an If-Match header value well formed (RFC 9110 §13.1.1): `*`, or a comma-separated list of
 * entity tags, each `W/"..."` or `"..."`? A bare `abc/3` is not an entity tag, and answering it
 * with "Content was modified" (409) sent clients looking for a conflict that was never there.
 */
export function ifMatchWellFormed(ifMatch: string): boolean {
  const v = ifMatch.trim();
  if (v === '*') return true;
  const tags = v
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return tags.length > 0 && tags.every((t) => /^(W\/)?"[\x21\x23-\x7e\x80-\xff]*"$/.test(t));
}

/** Does an If-Match header value name this revision? Accepts the weak and the strong form. */
export function ifMatchHolds(ifMatch: string, cid: string, rev: number): boolean {
  const want = `"${cid}/${rev}"`;
  return ifMatch
    .split(',')
    .map((t) => t.trim())
    .some((t) => t === '*' || t === want || t === `W/${want}`);
}

const DAY_MS = 86_400_000;
/** Years 0000-9999: where toISOString writes four digits (outside, it writes ±YYYYYY). */
const ISO_FOUR_DIGIT_YEARS = [-62_167_219_200_000, 253_402_300_800_000] as const;
let isoDay = Number.NaN;
let isoDayText = '';
const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `new Date(ms).toISOString()`, the form of every time the platform answers (creationTime,
 * modificationTime, feed events, search documents). The day's text is kept from the call
 * before: exports, feed pages and indexing format many times of one day, and toISOString was
 * a twentieth of an export's CPU.
 */
export function isoTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < ISO_FOUR_DIGIT_YEARS[0] || ms >= ISO_FOUR_DIGIT_YEARS[1]) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS) * DAY_MS;
  if (day !== isoDay) {
    isoDayText = new Date(day).toISOString().slice(0, 11);
    isoDay = day;
  }
  let rest = ms - day;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  return `${isoDayText}${two(h)}:${two(m)}:${two(s)}.${three(rest - s * 1000)}Z`;
}
