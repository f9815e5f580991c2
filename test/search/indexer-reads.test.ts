import { expect } from 'chai';
import { Indexer } from '../../src/actors/indexer.js';
import { bulk } from '../bulk/ndjson.js';
import { Client, startIsolatedPlatform, startTestPlatform } from '../support/platform.js';
import { ensureTestSolr } from '../support/solr.js';
import { eventually } from '../support/wait.js';

/**
 * An indexer behind (the engine slower than the commits) read INDEX_BATCH events from each of the
 * 64 partitions' streams at once, 12,800, and decoded the reply and every event in one go: 15-34
 * ms during which a process that also serves HTTP answered nothing, the p99 of its creates
 * (bench/RESULTS.md, seventeenth session). A read now takes about 1,024 events in all.
 */
describe('the indexer reads a backlog a bounded number of events at a time', function () {
  this.timeout(300_000);

  it('3,000 creates over 64 partitions written before the indexer starts: indexed in rounds of at most 1,024 events, every one of them', async () => {
    const solr = await ensureTestSolr();
    const writer = await startIsolatedPlatform({ PARTITIONS: '64', SOLR_URL: solr });
    const rounds: number[] = [];
    const index = Indexer.prototype.index;
    let indexer: Awaited<ReturnType<typeof startTestPlatform>> | undefined;
    try {
      // The writer's own indexer is stopped first: the backlog waits for the one started below.
      await writer.indexer?.stop();
      const editor = await new Client(writer.base).login('editor');
      const tag = `backlog${Date.now()}`;
      const lines = Array.from(
        { length: 3000 },
        (_, i) =>
          `${JSON.stringify({ op: 'create', content: { system: { contentType: 'article' }, aspects: { body: { _type: 'body', title: `${tag}-${i}` } } } })}\n`,
      );
      const r = await bulk(writer.base, editor.token!, lines);
      expect(r.answers.filter((a) => a.status === 201)).to.have.length(3000);
      Indexer.prototype.index = function (this: Indexer, cids: string[]) {
        rounds.push(cids.length);
        return index.call(this, cids);
      };
      indexer = await startTestPlatform({ REDIS_URL: writer.settings.REDIS_URL, PARTITIONS: '64', SOLR_URL: solr }, ['indexer']);
      await eventually(async () => {
        const found = await fetch(`${solr}/content/select?${new URLSearchParams({ q: `svc_text:${tag}`, rows: '0', wt: 'json' })}`);
        const j = (await found.json()) as { response: { numFound: number } };
        expect(j.response.numFound).to.equal(3000);
      }, 120_000);
      expect(Math.max(...rounds), rounds.join(',')).to.be.at.most(1024);
      expect(rounds.reduce((a, b) => a + b, 0)).to.be.at.least(3000);
    } finally {
      Indexer.prototype.index = index;
      await indexer?.stop();
      await writer.stop();
    }
  });
});
