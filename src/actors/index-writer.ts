import { partitionOf } from '../adapters/ids.js';
import type { Logger } from '../adapters/log.js';
import { keys, type RedisClient } from '../adapters/redis.js';
import { DocumentRefused, type ContentDocs, type SolrEngine } from '../adapters/search-engine.js';

/** Dead letters kept per partition (older ones are trimmed; `indexer_refused_documents_total` counts every one). */
const DEAD_LETTER_MAXLEN = 10_000;

/**
 * Writes the documents of contents to the search engine, for the indexer and the re-indexer
 * (CONTRACT §20 "Search documents": a document the engine refuses never stops the others).
 *
 * A batch the engine refuses (HTTP 400) is split in halves, and each half written, until the
 * refused content is alone; its documents are then sent one by one, and each one refused is set
 * aside: a dead letter in `indexer-dead:{p}` (content id, version, the engine's reason, time),
 * the content in `indexer:refused` (what `/health` and `indexer_refused_contents` count) and an
 * error log line naming all three. A refused document is removed from the index (with its
 * block): the one the index held under its id was made from an earlier state of the content
 * (a change of views, owners, hidden or time state keeps the version's id), and searches must
 * not go on finding the content as it was before that change. It is not found until it is
 * indexed again. The content's entry in `indexer:refused` goes when its documents are next
 * taken (a later version, a re-index, its deletion). Any other failure (a 5xx, the engine
 * unreachable) is thrown: an outage, which the caller retries with back-off.
 */
export class IndexWriter {
  constructor(
    private readonly engine: Pick<SolrEngine, 'replace' | 'add' | 'remove'>,
    private readonly redis: RedisClient,
    private readonly partitions: number,
    private readonly log: Logger,
  ) {}

  /** Makes the index hold these contents' documents, setting aside those the engine refuses. */
  async write(contents: ContentDocs[]): Promise<void> {
    if (!contents.length) return;
    try {
      await this.engine.replace(contents);
    } catch (e) {
      if (!(e instanceof DocumentRefused)) throw e;
      if (contents.length > 1) {
        const half = Math.ceil(contents.length / 2);
        await this.write(contents.slice(0, half));
        await this.write(contents.slice(half));
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
