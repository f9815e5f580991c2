import { expect } from 'chai';
import { Client, startTestPlatform } from '../support/platform.js';
import { until } from '../support/wait.js';
import { scheduleOwner } from './feed-clients.js';

type Ev = { kind: string; id: string; view?: string; visible?: boolean; revision: number; time: string; cursor: string };

/** CONTRACT §13 `timestate`: each onTime/offTime fires once, within 5 s, with two schedule owners running. */
describe('change feed time state and retention (CONTRACT §13)', () => {
  let a: Awaited<ReturnType<typeof startTestPlatform>>;
  let b: Awaited<ReturnType<typeof startTestPlatform>>;
  let c: Client;

  before(async () => {
    a = await startTestPlatform();
    b = await startTestPlatform({}, ['actors']);
    c = await new Client(a.base).login('editor');
  });
  after(async () => {
    await b?.stop();
    await a?.stop();
  });

  async function feed(since: string): Promise<{ changes: Ev[]; last: string }> {
    const out: Ev[] = [];
    let s = since;
    for (;;) {
      const r = await c.req('GET', `/changes?since=${s}&limit=1000`);
      expect(r.status, r.text).to.equal(200);
      out.push(...r.json.changes);
      s = r.json.last;
      if (!r.json.changes.length) return { changes: out, last: s };
    }
  }

  it('fires onTime and offTime once each, within 5 s, with two owners running', async function () {
    this.timeout(30000);
    await scheduleOwner(a, b);
    expect([a.timestate?.isOwner, b.timestate?.isOwner].filter(Boolean)).to.have.length(1);
    const since = (await c.req('GET', '/changes?since=now')).json.last;
    const on = Date.now() + 1500;
    const off = on + 1500;
    const timeState = { svcTimeState: { views: { svcPublic: { onTime: new Date(on).toISOString(), offTime: new Date(off).toISOString() } } } };
    const created = await c.create({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: 'scheduled' } },
      operations: [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: timeState },
      ],
    });
    expect(created.status, created.text).to.equal(201);
    const id: string = created.json.system.id;
    // A second content whose boundary is changed before it passes: the old one must not fire.
    const moved = await c.create({
      system: { contentType: 'article' },
      aspects: { body: { _type: 'body', title: 'moved' } },
      operations: [
        { _type: 'svcAssignToViews', views: ['svcPublic'] },
        { _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { onTime: new Date(on).toISOString() } } } } },
      ],
    });
    const later = new Date(Date.now() + 3600_000).toISOString();
    const upd = await c.update(
      moved.json.system.id,
      { aspects: {}, operations: [{ _type: 'svcContentMetadata', aspects: { svcTimeState: { views: { svcPublic: { onTime: later } } } } }] },
      moved.headers.get('etag'),
    );
    expect(upd.status, upd.text).to.equal(200);

    const seen: Ev[] = [];
    let cursor = since;
    await until(
      async () => {
        const r = await feed(cursor);
        cursor = r.last;
        seen.push(...r.changes.filter((e) => e.kind === 'timestate'));
        return seen.length >= 2;
      },
      off - Date.now() + 5000,
      'two timestate events',
    );
    const firedAt = Date.now();
    expect(firedAt - off).to.be.lessThan(5000);
    expect(seen.map((e) => [e.id, e.view, e.visible, e.time])).to.deep.equal([
      [id, 'svcPublic', true, new Date(on).toISOString()],
      [id, 'svcPublic', false, new Date(off).toISOString()],
    ]);
    // Both owners keep running: nothing fires again, the moved boundary never fires. The first
    // owner's fire step is run once more by hand too (it must find nothing).
    await a.timestate?.fireDue();
    await b.timestate?.fireDue();
    const again = await feed(cursor);
    expect(again.changes.filter((e) => e.kind === 'timestate')).to.deep.equal([]);
  });

  it('answers 410 (41000) for a cursor older than what is kept, and 400 for a malformed one', async () => {
    const early = (await c.req('GET', '/changes?since=now')).json.last;
    for (let i = 0; i < 3; i++) expect((await c.create({ system: { contentType: 'article' }, aspects: {} })).status).to.equal(201);
    const mid = (await c.req('GET', '/changes?since=now')).json.last;
    // The owner's retention, with the cut just after the events above.
    await (await scheduleOwner(a, b)).trim(Date.now() + 1);
    const gone = await c.req('GET', `/changes?since=${early}`);
    expect(gone.status, gone.text).to.equal(410);
    expect(gone.json.statusCode).to.equal('41000');
    const kept = await c.req('GET', `/changes?since=${mid}`);
    expect(kept.status, kept.text).to.equal(200);
    const poll = await c.req('GET', `/changes?since=${early}&feed=longpoll&timeout=100`);
    expect(poll.status).to.equal(410);
    // From the oldest kept, no 410 afterwards.
    const first = await c.req('GET', '/changes');
    expect(first.status).to.equal(200);
    expect((await c.req('GET', `/changes?since=${first.json.last}`)).status).to.equal(200);
    expect((await c.req('GET', `/changes?since=${early.slice(0, -2)}x!`)).status).to.equal(400);
  });
});
