import { expect } from 'chai';
import { Client, article, startTestPlatform } from '../support/platform.js';

type P = Awaited<ReturnType<typeof startTestPlatform>>;

/**
 * HTTP details real clients and caches rely on (issue 22 part 4): a 304 carries the
 * Cache-Control of its 200 (RFC 9110 §15.4.5), answers whose format `Accept` selects carry
 * `Vary: Accept`, and an If-Match that is not an entity tag is a 400 naming the form, not a 409.
 */
describe('HTTP details: 304 headers, Vary: Accept, If-Match syntax (issue 22)', () => {
  let p: P;
  let editor: Client;

  before(async () => {
    p = await startTestPlatform();
    editor = await new Client(p.base).login('editor');
  });
  after(async () => p.stop());

  const aliasOf = (id: string) => `/content/alias/${id}`;

  async function created() {
    const c = await editor.create(article('HTTP details'));
    expect(c.status, c.text).to.equal(201);
    const id: string = c.json.system.id;
    return { id, key: id.split('/')[1], etag: c.headers.get('etag')!, location: c.headers.get('location')! };
  }

  it('a 304 of a versioned read carries the Cache-Control and Vary of its 200', async () => {
    const c = await created();
    const ok = await editor.req('GET', c.location);
    expect(ok.status).to.equal(200);
    const cacheControl = ok.headers.get('cache-control');
    expect(cacheControl).to.include('max-age=');
    // kept privately for a year, for the token it was decided for only
    expect(ok.headers.get('vary')).to.equal('Accept, X-Auth-Token');
    const nm = await editor.req('GET', c.location, { headers: { 'If-None-Match': c.etag } });
    expect(nm.status).to.equal(304);
    expect(nm.headers.get('etag')).to.equal(c.etag);
    expect(nm.headers.get('cache-control')).to.equal(cacheControl);
    expect(nm.headers.get('vary')).to.equal('Accept, X-Auth-Token');
    expect(nm.text).to.equal('');
  });

  it('a 304 of an unversioned read carries the Cache-Control of its 303', async () => {
    const c = await created();
    const see = await editor.req('GET', aliasOf(c.id));
    expect(see.status).to.equal(303);
    const nm = await editor.req('GET', aliasOf(c.id), { headers: { 'If-None-Match': c.etag } });
    expect(nm.status).to.equal(304);
    expect(nm.headers.get('cache-control')).to.equal(see.headers.get('cache-control'));
  });

  it('answers whose format follows Accept carry Vary: Accept (reads, create, update)', async () => {
    const c = await editor.create(article('pretty'), { Accept: 'application/json; pretty=true' });
    expect(c.status).to.equal(201);
    expect(c.headers.get('vary')).to.equal('Accept');
    expect(c.text).to.include('\n  ');
    const loc = c.headers.get('location')!;
    const pretty = await editor.req('GET', loc, { headers: { Accept: 'application/json; pretty=true' } });
    const plain = await editor.req('GET', loc);
    expect(pretty.text).not.to.equal(plain.text);
    expect(pretty.headers.get('vary')).to.equal('Accept, X-Auth-Token');
    expect(plain.headers.get('vary')).to.equal('Accept, X-Auth-Token');
    for (const kind of ['metadata', 'history']) {
      const r = await editor.req('GET', `${loc}/${kind}`);
      expect(r.status, `${kind}: ${r.text}`).to.equal(200);
      expect(r.headers.get('vary'), kind).to.equal('Accept, X-Auth-Token');
    }
    const u = await editor.update(c.json.system.id, article('pretty 2'), c.headers.get('etag')!);
    expect(u.status).to.equal(200);
    expect(u.headers.get('vary')).to.equal('Accept');
  });

  it('an If-Match that is not an entity tag answers 400 naming the form, nothing changed', async () => {
    const c = await created();
    for (const bad of [`${c.key}/1`, `"${c.key}/1`, `W/${c.key}/1`, 'x', '1']) {
      const put = await editor.req('PUT', aliasOf(c.id), { body: article('changed'), headers: { 'If-Match': bad } });
      expect(put.status, `PUT If-Match: ${bad}`).to.equal(400);
      expect(put.json.statusCode).to.equal('40000');
      expect(put.json.message).to.include('W/"<content key>/<revision>"');
      expect(put.json.message).to.include('ETag header of a read');
      expect(put.json.extraInfo).to.deep.equal({ header: 'If-Match', expected: 'W/"<content key>/<revision>"' });
      const del = await editor.req('DELETE', aliasOf(c.id), { headers: { 'If-Match': bad } });
      expect(del.status, `DELETE If-Match: ${bad}`).to.equal(400);
      const view = await editor.req('PUT', '/view/svcPublic', {
        body: { version: (await editor.read(aliasOf(c.id))).json.system.version },
        headers: { 'If-Match': bad },
      });
      expect(view.status, `PUT view If-Match: ${bad}`).to.equal(400);
    }
    const read = await editor.read(aliasOf(c.id));
    expect(read.json.aspects.body.title).to.equal('HTTP details');
    expect(read.headers.get('etag')).to.equal(c.etag);
    // the forms that are entity tags still work: weak, strong, a list, `*`
    const strong = await editor.req('PUT', aliasOf(c.id), { body: article('strong'), headers: { 'If-Match': `"${c.key}/1"` } });
    expect(strong.status, strong.text).to.equal(200);
    const list = await editor.req('PUT', aliasOf(c.id), { body: article('list'), headers: { 'If-Match': `W/"${c.key}/1", W/"${c.key}/2"` } });
    expect(list.status, list.text).to.equal(200);
    const any = await editor.req('PUT', aliasOf(c.id), { body: article('any'), headers: { 'If-Match': '*' } });
    expect(any.status, any.text).to.equal(200);
  });

  it('errors on If-Match say where the ETag comes from: missing (400) and stale (409 with the current ETag)', async () => {
    const c = await created();
    const none = await editor.req('PUT', aliasOf(c.id), { body: article('x') });
    expect(none.status).to.equal(400);
    expect(none.json.message).to.include('ETag header of a read');
    const noneDel = await editor.req('DELETE', aliasOf(c.id));
    expect(noneDel.status).to.equal(400);
    expect(noneDel.json.message).to.include('W/"<content key>/<revision>"');
    const u = await editor.update(c.id, article('v2'), c.etag);
    const current = u.headers.get('etag')!;
    const stale = await editor.req('PUT', aliasOf(c.id), { body: article('v3'), headers: { 'If-Match': c.etag } });
    expect(stale.status).to.equal(409);
    expect(stale.json.statusCode).to.equal('40900');
    expect(stale.json.message).to.include(current);
    expect(stale.json.message).to.include('ETag header of a read');
    expect(stale.json.extraInfo.ETag).to.equal(current);
  });
});
