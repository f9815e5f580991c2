import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { bulk } from '../bulk/ndjson.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * Review s23b (of the fourth bodies-held review, 773e08b): the 403-before-the-body rule covers
 * every collected write body, but not the one write route whose body is streamed, the bulk
 * import (CONTRACT §16). An account with Read alone may open imports whose every line answers
 * 403, and keep them open as long as it sends a line now and then (uWS cuts a body idle 10 s):
 * each holds one of the process's IMPORT_MAX imports (16 by default, IMPORT_MAX_PER_USER 4 a
 * user), so four reader accounts hold them all and every writer's import answers 503 — the
 * denial 773e08b closed for collected bodies (readers' writes filling BODIES_HELD_BYTES), on
 * another bound. Measured here (actors running, so the readers' lines are answered 403 at once)
 * with IMPORT_MAX 3, IMPORT_MAX_PER_USER 2: two readers' three open imports, a line each sent
 * again after 3 s, and an editor's import answers 503 "At most 3 imports may run at once".
 *
 * Now an import of a caller who may write nothing (none of Create, Update, Delete anywhere) still
 * answers 200 with a 403 line for each input line, but such imports are counted apart, at most a
 * quarter of IMPORT_MAX together (at least 1): they never take a writer's place.
 */
describe('review s23b: readers with Read alone do not hold the bulk import places (IMPORT_MAX) of writers', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  const T = `s23bk${Date.now().toString(36)}`;

  before(async () => {
    p = await startTestPlatform({ IMPORT_MAX_PER_USER: '2', IMPORT_MAX: '3' });
    for (const r of ['r1', 'r2']) await p.tokens!.createAccount(`${T}-${r}`, 'pw', { __global__: ['reader'] });
  });
  after(async () => p?.stop());

  it("a writer's import still runs while readers' imports, all of whose lines answer 403, stay open", async () => {
    const [r1, r2] = await Promise.all(['r1', 'r2'].map((r) => new Client(p.base).login(`${T}-${r}`, 'pw')));
    const editor = await new Client(p.base).login('editor');
    const line = `${JSON.stringify({ op: 'create', content: { system: { contentType: 'article' }, aspects: { body: { title: 'x' } } } })}\n`;
    const open = [r1, r1, r2].map((c) => {
      const body = new Readable({ read() {} });
      body.push(line); // a create a reader may not make: 403
      return { body, run: bulk(p.base, c.token!, body) };
    });
    let ended: Awaited<(typeof open)[number]['run']>[] = [];
    try {
      await sleep(3000);
      for (const o of open) o.body.push(line);
      await sleep(1000);
      const write = await editor.req('POST', '/bulk', { body: '', headers: { 'Content-Type': 'application/x-ndjson' } });
      expect(write.status, write.text).to.equal(200);
    } finally {
      for (const o of open) o.body.push(null);
      ended = await Promise.all(open.map((o) => o.run));
    }
    // The readers' imports share one place (a quarter of IMPORT_MAX 3, at least 1): the first
    // answers its two lines 403, the others 503 at once.
    expect(ended.map((e) => e.status).sort()).to.deep.equal([200, 503, 503]);
    const ran = ended.find((e) => e.status === 200)!;
    expect(ran.answers.map((a) => a.status)).to.deep.equal([403, 403]);
  });
});
