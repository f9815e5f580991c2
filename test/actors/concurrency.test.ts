import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';

/**
 * One writer per content and optimistic locking (ARCHITECTURE principle 1, spec Errors rule 1),
 * with 100 clients on one content. Run twice: commands handed to the actor host of the same
 * process (LOCAL_DISPATCH, the default of `npm start`), and through the command streams.
 */

type P = Awaited<ReturnType<typeof startTestPlatform>>;

const CLIENTS = 100;

for (const dispatch of ['local', 'stream'] as const) {
  describe(`actors: ${CLIENTS} clients updating one content at once (${dispatch} dispatch)`, function () {
    this.timeout(60000);
    let p: P;
    const clients: Client[] = [];

    before(async () => {
      p = await startTestPlatform({ LOCAL_DISPATCH: dispatch === 'local' ? 'true' : 'false' });
      const first = await new Client(p.base).login('editor');
      for (let i = 0; i < CLIENTS; i++) clients.push(new Client(p.base, first.token));
    });
    after(async () => p?.stop());

    it('the same If-Match from every client: exactly one wins (200), the others get 409/40900 with the winner ETag', async () => {
      const editor = clients[0];
      const c = await editor.create(article('start'));
      expect(c.status, c.text).to.equal(201);
      const id = c.json.system.id;
      const key = id.split('/')[1];
      const etag = c.headers.get('etag')!;
      const results = await Promise.all(
        clients.map((cl, i) => cl.req('PUT', `/content/alias/${id}`, { body: article(`client ${i}`), headers: { 'If-Match': etag } })),
      );

      const won = results.filter((r) => r.status === 200);
      const lost = results.filter((r) => r.status === 409);
      expect(won, 'exactly one winner').to.have.length(1);
      expect(lost, 'every other client conflicts').to.have.length(CLIENTS - 1);
      expect(won[0].headers.get('etag')).to.equal(`W/"${key}/2"`);
      for (const r of lost) {
        expect(r.json.statusCode).to.equal('40900');
        expect(r.json.extraInfo.ETag).to.equal(won[0].headers.get('etag'));
        expect(r.json.extraInfo.revision).to.equal(2);
        expect(r.json.extraInfo.conflictingVersion).to.equal(won[0].json.system.version);
      }
      const h = await editor.read(`/content/alias/${id}/history?atLeastRevision=2`);
      expect(h.json.versions, 'one new version, no more').to.have.length(2);
      const head = await editor.read(`/content/alias/${id}?atLeastRevision=2`);
      expect(head.json.system.version).to.equal(won[0].json.system.version);
      expect(head.json.aspects.body.title).to.equal(won[0].json.aspects.body.title);
    });

    it('every client retrying with extraInfo.ETag of its 409 until it wins: revision 1 + 100, each write exactly once, none lost', async () => {
      const editor = clients[0];
      const c = await editor.create(article('start', { markers: [] }));
      expect(c.status, c.text).to.equal(201);
      const id = c.json.system.id;
      let conflicts = 0;
      const others: string[] = [];

      const client = async (i: number) => {
        let etag = c.headers.get('etag')!;
        for (let attempt = 0; attempt < 10 * CLIENTS; attempt++) {
          // merge mode appends to a list: a write based on a stale version would lose markers
          const r = await clients[i].req('PUT', `/content/alias/${id}?updateMode=merge`, {
            body: { aspects: { body: { _type: 'body', markers: [`m${i}`] } } },
            headers: { 'If-Match': etag },
          });
          if (r.status === 200)
            return {
              i,
              version: r.json.system.version as string,
              rev: Number(/\/(\d+)"$/.exec(r.headers.get('etag')!)![1]),
              markers: r.json.aspects.body.markers as string[],
            };
          if (r.status !== 409 || r.json?.statusCode !== '40900') others.push(`${r.status} ${r.text}`);
          expect(r.status, r.text).to.equal(409);
          conflicts++;
          etag = r.json.extraInfo.ETag;
        }
        throw new Error(`client ${i} never got through`);
      };
      const wins = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));

      expect(others, 'only 200 and 409/40900 answers').to.deep.equal([]);
      expect(conflicts, 'the clients did conflict').to.be.greaterThan(0);
      expect(new Set(wins.map((w) => w.version)).size, 'a new version per client').to.equal(CLIENTS);
      expect(
        wins.map((w) => w.rev).sort((a, b) => a - b),
        'one revision per client, 2..101',
      ).to.deep.equal(Array.from({ length: CLIENTS }, (_, k) => k + 2));

      const final = await editor.req('GET', `/content/alias/${id}?atLeastRevision=${CLIENTS + 1}`);
      expect(final.status).to.equal(303);
      expect(final.headers.get('location')).to.match(new RegExp(`/${CLIENTS + 1}$`));

      const h = await editor.read(`/content/alias/${id}/history?atLeastRevision=${CLIENTS + 1}`);
      const versions: string[] = h.json.versions.map((v: { version: string }) => v.version);
      expect(versions, 'history: 1 + 100 versions').to.have.length(CLIENTS + 1);
      expect(new Set(versions).size).to.equal(CLIENTS + 1);
      expect(
        h.json.versions.map((v: { revision: { revisionNumber: number } }) => v.revision.revisionNumber).sort((a: number, b: number) => a - b),
      ).to.deep.equal(Array.from({ length: CLIENTS + 1 }, (_, k) => k + 1));
      for (const w of wins)
        expect(
          versions.filter((v) => v === w.version),
          `client ${w.i}'s version once in history`,
        ).to.have.length(1);

      // Each revision is the previous one plus exactly the marker of the client acknowledged
      // at that revision: every write is there once, and none was based on a stale version.
      const byRev = new Map(wins.map((w) => [w.rev, w]));
      let previous: string[] = [];
      for (let rev = 1; rev <= CLIENTS + 1; rev++) {
        const r = await editor.req('GET', `/content/alias/${id}/${rev}`);
        expect(r.status, r.text).to.equal(200);
        const markers: string[] = r.json.aspects.body.markers;
        if (rev === 1) {
          expect(markers).to.deep.equal([]);
        } else {
          const w = byRev.get(rev)!;
          expect(r.json.system.version, `revision ${rev} is client ${w.i}'s version`).to.equal(w.version);
          expect(markers, `revision ${rev} = revision ${rev - 1} + m${w.i}`).to.deep.equal([...previous, `m${w.i}`]);
          expect(w.markers, `client ${w.i} was answered what was stored`).to.deep.equal(markers);
        }
        previous = markers;
      }
      expect(previous, 'the last version holds every client marker exactly once').to.have.length(CLIENTS);
      expect(new Set(previous)).to.deep.equal(new Set(Array.from({ length: CLIENTS }, (_, i) => `m${i}`)));
    });
  });
}
