import { partitionOf, randomId } from '../adapters/ids.js';
import type { Logger } from '../adapters/log.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { DocumentRefused, mayStillApply, type ContentDocs, type SolrEngine } from '../adapters/search-engine.js';

/** Dead letters kept per partition (older ones are trimmed; `indexer_refused_documents_total` counts every one). */
const DEAD_LETTER_MAXLEN = 10_000;

/**
 * How long a writer counts as in flight on the contents it claimed, unless it settles first.
 * Longer than any write takes (each request to the engine times out after 60 s), so that past
 * it a writer's requests are done: a claim still there then is a process that died.
 */
export const CLAIM_LEASE_MS = 10 * 60_000;

/**
 * Writes the documents of contents to the search engine, for the indexer and the re-indexer
 * (CONTRACT §20 "Search documents": a document the engine refuses never stops the others), and
 * makes the index hold exactly those documents of each content.
 *
 * **Stale documents.** A document must never stay in the index once its content is deleted or its
 * version left the indexed views. The writer keeps, per content, the root documents it sent that
 * the index may still hold: the record, a field of `ixd:{p}` (the content's partition: one script
 * call per partition reads and writes the records of a batch, also on Redis Cluster). A batch:
 *   1. claims its documents (index-claim-1.lua): the script answers what each record kept and
 *      adds the documents about to be sent, before anything is sent, so that a process dying
 *      after the engine took them leaves them recorded;
 *   2. deletes by id the kept roots that are not among the documents now (with their blocks),
 *      then adds the documents: no search (which would miss what the last 500 ms added) and no
 *      delete-by-query (about twice the engine's CPU of an update batch, bench/RESULTS.md);
 *   3. settles (index-settle-1.lua): the record keeps exactly the documents now, nothing (no
 *      field) for a deleted content, an empty record for a live one with no documents.
 * A record may hold more than the index (a refused document, a write that failed after its
 * claim): an id deleted once more is harmless. It never holds less. Writers in flight on the same
 * content at once (two indexers, the re-indexer) never shrink its record, since either's
 * documents may reach the engine after the other's delete; nor does a write that failed, and the
 * claim of one whose requests the engine may still apply (a timeout) stands for its lease
 * (`CLAIM_LEASE_MS`), as that of a process that died does. The next writer alone on the content
 * makes the record exact. A content without a record (indexed before records were kept, or
 * deleted, and indexed again) has its stale documents deleted by one delete-by-query
 * (`deleteStale`) instead, until a write of it succeeds; one on its first revision has nothing
 * older to delete. Records are only sound while every writer of the index keeps them: after
 * indexers of an earlier release ran beside these (a rolling upgrade), or Redis was restored from
 * a backup older than the index, delete the `ixd:{p}` hashes (each content then falls back to the
 * delete-by-query once).
 *
 * **Refused documents.** A batch the engine refuses (HTTP 400) is split in halves, and each half
 * added, until the refused content is alone; its documents are then sent one by one, and each one
 * refused is set aside: a dead letter in `indexer-dead:{p}` (content id, version, the engine's
 * reason, time), the content in `indexer:refused` (what `/health` and `indexer_refused_contents`
 * count) and an error log line naming all three. A refused document is removed from the index
 * (with its block): the one the index held under its id was made from an earlier state of the
 * content (a change of views, owners, hidden or time state keeps the version's id), and searches
 * must not go on finding the content as it was before that change. It is not found until it is
 * indexed again (its id stays recorded). The content's entry in `indexer:refused` goes when its
 * documents are next taken (a later version, a re-index, its deletion). Any other failure (a 5xx,
 * the engine unreachable) is thrown: an outage, which the caller retries with back-off.
 */
export class IndexWriter {
  constructor(
    private readonly engine: Pick<SolrEngine, 'add' | 'remove' | 'deleteStale'>,
    private readonly redis: RedisClient,
    private readonly partitions: number,
    private readonly log: Logger,
    private readonly leaseMs = CLAIM_LEASE_MS,
  ) {}

  /** Makes the index hold exactly these contents' documents, setting aside those the engine refuses. */
  async write(contents: ContentDocs[]): Promise<void> {
    if (!contents.length) return;
    const token = randomId(12);
    let kept: Map<string, string[] | null> | undefined;
    try {
      kept = await this.claim(contents, token);
      const stale: string[] = [];
      const unrecorded: ContentDocs[] = [];
      for (const c of contents) {
        const old = kept.get(c.cid);
        if (old === null) {
          if (!c.firstRevision) unrecorded.push(c);
          continue;
        }
        const now = new Set(c.docs.map((d) => String(d.id)));
        for (const id of old ?? []) if (!now.has(id)) stale.push(id);
      }
      await this.engine.remove(stale);
      await this.engine.deleteStale(unrecorded);
      await this.add(contents);
    } catch (e) {
      // A claim whose requests the engine may still apply stands until its lease ends; else it
      // goes, the record keeping what it kept (the retry then makes it exact).
      if (!kept || !mayStillApply(e)) await this.settle(contents, token, new Map(), 1).catch(() => undefined);
      throw e;
    }
    await this.settle(contents, token, kept, 0);
  }

  /** What each content's record kept (root ids; null: no record, or not swept), its documents added to it (index-claim-1.lua). */
  private async claim(contents: ContentDocs[], token: string): Promise<Map<string, string[] | null>> {
    const out = new Map<string, string[] | null>();
    await Promise.all(
      [...this.byPartition(contents)].map(async ([p, group]) => {
        const args = group.flatMap((c) => [c.cid, c.docs.length, ...c.docs.map((d) => recordKey(c.cid, String(d.id)))]);
        const answer = await this.redis.indexClaim(keys.indexedDocs(p), token, this.leaseMs, ...args);
        for (const [i, c] of group.entries()) out.set(c.cid, answer[i] ? answer[i].map((k) => docId(c.cid, k)) : null);
      }),
    );
    return out;
  }

  /**
   * Ends the claim `token` (index-settle-1.lua): the records keep exactly the documents now,
   * unless `release` or another writer was beside it. `kept`: the claim's answers (null: this
   * writer deleted the content's documents by query, or it had none older).
   */
  private async settle(contents: ContentDocs[], token: string, kept: Map<string, string[] | null>, release: 0 | 1): Promise<void> {
    await Promise.all(
      [...this.byPartition(contents)].map(([p, group]) => {
        const args = group.flatMap((c) => [
          c.cid,
          c.gone ? 1 : 0,
          kept.get(c.cid) === null ? 1 : 0,
          c.docs.length,
          ...c.docs.map((d) => recordKey(c.cid, String(d.id))),
        ]);
        return this.redis.indexSettle(keys.indexedDocs(p), token, release, ...args);
      }),
    );
  }

  private byPartition(contents: ContentDocs[]): Map<number, ContentDocs[]> {
    const out = new Map<number, ContentDocs[]>();
    for (const c of contents) {
      const p = partitionOf(c.cid, this.partitions);
      const group = out.get(p);
      if (group) group.push(c);
      else out.set(p, [c]);
    }
    return out;
  }

  /** Adds the contents' documents, splitting a batch the engine refuses down to the refused content. */
  private async add(contents: ContentDocs[]): Promise<void> {
    try {
      const docs = contents.flatMap((c) => c.docs);
      if (docs.length) await this.engine.add(docs);
    } catch (e) {
      if (!(e instanceof DocumentRefused)) throw e;
      if (contents.length > 1) {
        const half = Math.ceil(contents.length / 2);
        await this.add(contents.slice(0, half));
        await this.add(contents.slice(half));
      } else {
        await this.writeAlone(contents[0], e);
      }
      return;
    }
    await this.redis.hdel(keys.indexerRefused, ...contents.map((c) => c.cid));
  }

  /** One content whose batch was refused: its documents one by one (its stale ones are already deleted). */
  private async writeAlone({ cid, docs }: ContentDocs, refusal: DocumentRefused): Promise<void> {
    const refused: { version: string; reason: string }[] = [];
    if (docs.length === 1) refused.push({ version: String(docs[0].id), reason: refusal.reason });
    else {
      for (const doc of docs) {
        try {
          await this.engine.add([doc]);
        } catch (e) {
          if (!(e instanceof DocumentRefused)) throw e;
          refused.push({ version: String(doc.id), reason: e.reason });
        }
      }
    }
    if (!refused.length) {
      await this.redis.hdel(keys.indexerRefused, cid);
      return;
    }
    // Fail closed: what the index held under these ids shows the content's earlier state.
    await this.engine.remove(refused.map((r) => r.version));
    const deadLetters = keys.indexerDeadLetter(partitionOf(cid, this.partitions));
    const time = new Date().toISOString();
    for (const { version, reason } of refused) {
      await this.redis.xadd(deadLetters, 'MAXLEN', '~', DEAD_LETTER_MAXLEN, '*', 'cid', cid, 'version', version, 'reason', reason, 'time', time);
      this.log.error(
        { cid, version, reason, deadLetters },
        'the search engine refused a document; set aside and removed from the index, the others are indexed',
      );
    }
    await this.redis.hset(keys.indexerRefused, cid, JSON.stringify({ versions: refused.map((r) => r.version), reason: refused[0].reason, time }));
  }
}

/**
 * A root id as its content's record keeps it: the version key of `c:<cid>:<key>` (the ids the
 * indexer makes, `searchBlock`), any other id whole after `=` (which starts no version key).
 */
function recordKey(cid: string, id: string): string {
  const prefix = `c:${cid}:`;
  return id.startsWith(prefix) && id.length > prefix.length && !id.startsWith('=', prefix.length) ? id.slice(prefix.length) : `=${id}`;
}

/** The root id a record key stands for (`recordKey`). */
function docId(cid: string, key: string): string {
  return key.startsWith('=') ? key.slice(1) : `c:${cid}:${key}`;
}
