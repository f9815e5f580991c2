import { expect } from 'chai';
import { MAX_METADATA_CHARS, MAX_METADATA_VALUES } from '../../src/content/metadata.js';
import { Client, startTestPlatform } from '../support/platform.js';

/**
 * A content's metadata aspects are bounded at the write (src/content/metadata.ts): they travel in
 * its head, every snapshot and every feed event, and are decoded wherever one is read. Before
 * (the twenty-first session's review), a sportseditor's 300 KB create whose metadata held
 * 99,000 empty objects cost about 20 ms of the event loop at each decode of its head and 6.3 MB
 * while held; any writer could make any number of such contents.
 */
describe('metadata aspects are bounded at the write', function () {
  this.timeout(60_000);
  let p: Awaited<ReturnType<typeof startTestPlatform>>;
  let sports: Client;

  before(async () => {
    p = await startTestPlatform();
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p?.stop());

  const owners = { _type: 'svcSecurityContext', owners: ['sports'] };
  const create = (m: unknown) =>
    sports.create({
      system: { contentType: 'article' },
      aspects: { body: { title: 'meta' } },
      operations: [{ _type: 'svcContentMetadata', aspects: { svcSecurityContext: owners, m } }],
    });

  it(`a create whose metadata holds more than ${MAX_METADATA_VALUES} values answers 400 naming svcContentMetadata; nothing is stored`, async () => {
    const r = await create({ a: Array.from({ length: 99_000 }, () => ({})) });
    expect(r.status, r.text).to.equal(400);
    expect(r.json.extraInfo).to.include({ path: 'svcContentMetadata', limit: MAX_METADATA_VALUES });
    const ok = await create({ a: Array.from({ length: 2_000 }, () => ({})) });
    expect(ok.status, ok.text).to.equal(201);
  });

  it(`so does one of more than ${MAX_METADATA_CHARS} characters, and an update that would grow metadata past either`, async () => {
    const long = await create({ s: 'x'.repeat(MAX_METADATA_CHARS + 1) });
    expect(long.status, long.text).to.equal(400);
    expect(long.json.extraInfo).to.include({ path: 'svcContentMetadata', limit: MAX_METADATA_CHARS });
    const c = await create({ a: [1, 2, 3] });
    expect(c.status, c.text).to.equal(201);
    const id = c.json.system.id as string;
    const grow = await sports.update(
      id,
      {
        aspects: { body: { title: 'meta 2' } },
        operations: [{ _type: 'svcContentMetadata', aspects: { big: { a: Array.from({ length: MAX_METADATA_VALUES }, (_, i) => i) } } }],
      },
      c.headers.get('etag'),
    );
    expect(grow.status, grow.text).to.equal(400);
    const small = await sports.update(
      id,
      { aspects: { body: { title: 'meta 3' } }, operations: [{ _type: 'svcContentMetadata', aspects: { small: { a: 1 } } }] },
      c.headers.get('etag'),
    );
    expect(small.status, small.text).to.equal(200);
  });
});
