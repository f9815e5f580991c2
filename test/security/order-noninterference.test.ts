import { expect } from 'chai';
import { partitionOf } from '../../src/adapters/ids.js';
import { bulk } from '../bulk/ndjson.js';
import { Client, startIsolatedPlatform } from '../support/platform.js';

/**
 * What a caller's own keys and the order of its own answers tell about content it may not read
 * (SECURITY.md: content and version keys; the workspace listing; the export). Found by review on
 * 2026-11-27; each case failed on the code before its fix:
 * - keys came from one monotonic ULID factory, so the keys next to a caller's own (plus 1 in the
 *   same millisecond) were other users' content, confirmed by a 403;
 * - the workspace listing and the export were in the order of a Redis set's or sorted set's
 *   scan, which the size of its hash table decides, so hidden drafts and content reordered the
 *   caller's own lines.
 */
describe('security: keys and the order of answers tell nothing of content the caller may not read', function () {
  this.timeout(180_000);
  let p: Awaited<ReturnType<typeof startIsolatedPlatform>>;
  let editor: Client;
  let sports: Client;
  const T = `on${Date.now().toString(36)}`;
  const owners = (o: string[]) => ({ _type: 'svcContentMetadata', aspects: { svcSecurityContext: { owners: o } } });
  const createLine = (type: string, owner: string, i: number) =>
    `${JSON.stringify({ op: 'create', content: { system: { contentType: type }, aspects: { body: { _type: 'body', title: `${owner} ${i}` } }, operations: [owners([owner])] } })}\n`;
  const createAll = async (c: Client, type: string, owner: string, n: number) => {
    const r = await bulk(
      p.base,
      c.token!,
      Array.from({ length: n }, (_, i) => createLine(type, owner, i)),
    );
    expect(r.answers.filter((a) => a.status === 201)).to.have.length(n);
    return r.answers;
  };

  before(async () => {
    // A private Redis: the export reads every partition there is (default PARTITIONS, 8).
    p = await startIsolatedPlatform();
    editor = await new Client(p.base).login('editor');
    sports = await new Client(p.base).login('sportseditor');
  });
  after(async () => p?.stop());

  it('the keys next to a caller own are not the keys of content it may not read', async () => {
    const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    /** The ULID after `u` in the same millisecond (what a monotonic factory makes next). */
    const next = (u: string): string => {
      const c = u.split('');
      for (let i = c.length - 1; i >= 10; i--) {
        const d = ALPHABET.indexOf(c[i]);
        if (d < 31) {
          c[i] = ALPHABET[d + 1];
          return c.join('');
        }
        c[i] = '0';
      }
      return u;
    };
    // Both write at once, as a newsroom does.
    const [mine, theirs] = await Promise.all([createAll(sports, `${T}k`, 'sports', 600), createAll(editor, `${T}k`, 'culture', 600)]);
    const culture = new Set(theirs.map((a) => (a.id as string).replace('contentid/', '')));
    const own = new Set(mine.flatMap((a) => [(a.id as string).replace('contentid/', ''), (a.version as string).split(':')[2]]));
    const guesses = new Set<string>();
    for (const k of own) for (let c = next(k), i = 0; i < 4 && !own.has(c); i++, c = next(c)) guesses.add(c);
    // On the old code 90 % of the culture keys were among the guesses.
    expect([...guesses].filter((g) => culture.has(g))).to.deep.equal([]);
  });

  it('the workspace listing is the same before and after drafts the caller may not read are added', async () => {
    const WS = `${T}ws`;
    const draft = async (c: Client, owner: string, title: string) => {
      const r = await c.create({ system: { contentType: 'article' }, aspects: { body: { title } }, operations: [owners([owner])] });
      expect(r.status, r.text).to.equal(201);
      const d = await c.req('PUT', `/content/workspace/${WS}/alias/${r.json.system.id}`, { body: { aspects: { body: { title: `${title} draft` } } } });
      expect(d.status, d.text).to.equal(200);
    };
    for (let i = 0; i < 12; i++) await draft(sports, 'sports', `sports ${i}`);
    const before = await sports.req('GET', `/content/workspace/${WS}`);
    expect(Object.keys(before.json.drafts)).to.have.length(12);
    for (let i = 0; i < 200; i++) await draft(editor, 'culture', `culture ${i}`);
    // On the old code the same 12 drafts came back in another order.
    expect((await sports.req('GET', `/content/workspace/${WS}`)).text).to.equal(before.text);
  });

  it('an export is the same, line for line, before and after content the caller may not read is added', async () => {
    const type = `${T}e`;
    const exported = async (query: string) => {
      const r = await sports.req('GET', `/export${query}`);
      expect(r.status).to.equal(200);
      return r.text
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { id: string }).id);
    };
    /** Lines grouped by partition (any caller can compute a key's partition), each in export order. */
    const byPartition = (ids: string[]) => {
      const groups: string[][] = Array.from({ length: 8 }, () => []);
      for (const id of ids) groups[partitionOf(id.replace('contentid/', ''), 8)].push(id);
      return groups;
    };
    await createAll(sports, type, 'sports', 40);
    const before = [byPartition(await exported('')), byPartition(await exported(`?types=${type}`))];
    expect(before[1].flat()).to.have.length(40);
    await createAll(editor, type, 'culture', 1600);
    // On the old code 8 of 8 partitions (7 of 8 with types) changed their order.
    expect([byPartition(await exported('')), byPartition(await exported(`?types=${type}`))]).to.deep.equal(before);
  });
});
