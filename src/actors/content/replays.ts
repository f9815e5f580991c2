import { pack, unpack } from '../../adapters/codec.js';
import type { ContentStore } from '../../adapters/content-store.js';
import type { Snapshot } from '../../content/model.js';
import type { Reply } from '../runtime.js';
import { noDraft, type DraftResult, type SubResult, type WriteResult } from './commands.js';

/**
 * What the commit of a stream command records for a replay of it (`done:{p}:<command>`, kept
 * DEDUP_TTL_SECONDS: a day): the answer's few facts, never what the commit wrote. An answer that
 * holds a version or a draft names where the commit wrote it, and a replay reads it from there
 * (`replyOf`). Each whole reply kept a copy of the content for that day, outside what Redis may
 * hold per content (SECURITY.md): 20 updates of a few bytes on a 4 MiB content kept 84 MB. Small
 * answers are kept whole, as every record of an earlier build is (read as it is).
 */
export type RecordedReply =
  | Reply
  /** A create, update, restore or promote: the snapshot of revision `rev`, and the version it names. */
  | { id: string; ok: true; write: { cid: string; rev: number; subResults: SubResult[] } }
  /** A draft write (create or update on a workspace): the draft of `cid` on `workspace`. */
  | { id: string; ok: true; draft: { cid: string; workspace: string; subResults: SubResult[] } };

/** The answers recorded whole: a revision made (delete, views, alias release), a draft removed, an alias released. */
export type SmallValue = { cid: string; rev: number } | { removed: true } | { released: boolean };

/** The record (packed) of a command that committed and answered `value`. */
export function recordOf(id: string, value: WriteResult | DraftResult | SmallValue): Buffer {
  if ('version' in value) return pack({ id, ok: true, write: { cid: value.snapshot.cid, rev: value.snapshot.rev, subResults: value.subResults } });
  if ('draft' in value) return pack({ id, ok: true, draft: { cid: value.draft.cid, workspace: value.draft.workspace, subResults: value.subResults } });
  return pack({ id, ok: true, value });
}

/**
 * The answer a record stands for. A write's: the snapshot of the revision the command made and the
 * version it names, as first answered, whatever was written since (from the archive once moved
 * there). A draft write's: the draft the workspace holds, the command's unless a later write
 * replaced it (a workspace keeps one version of a content: spec, "Drafts per workspace"), or 404
 * once it was removed. A record kept whole is the answer.
 */
export async function replyOf(store: ContentStore, r: RecordedReply): Promise<Reply> {
  if ('write' in r) {
    const { cid, rev, subResults } = r.write;
    const snapshot = await store.snapshotAt(cid, rev);
    const value = snapshot && (await writeResultOf(store, snapshot, subResults));
    if (!value) throw new Error(`revision ${rev} of ${cid}, which command ${r.id} made, is missing`);
    return { id: r.id, ok: true, value };
  }
  if ('draft' in r) {
    const { cid, workspace, subResults } = r.draft;
    const draft = await store.draft(cid, workspace);
    return draft ? { id: r.id, ok: true, value: { draft, subResults } satisfies DraftResult } : { id: r.id, ok: false, error: noDraft(workspace).toWire() };
  }
  return r;
}

/** `replyOf` of a packed record; one kept whole is answered as the very bytes (sent on unchanged). */
export async function replayOf(store: ContentStore, recorded: Buffer): Promise<Reply | Buffer> {
  const r = unpack<RecordedReply>(recorded);
  return 'write' in r || 'draft' in r ? replyOf(store, r) : recorded;
}

/** The answer of the write that made `snapshot`: it and the version it names; null when that version is missing. */
export async function writeResultOf(store: ContentStore, snapshot: Snapshot, subResults: SubResult[]): Promise<WriteResult | null> {
  const version = await store.version(snapshot.cid, snapshot.head);
  return version && { snapshot, version, subResults };
}
