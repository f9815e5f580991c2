import { expect } from 'chai';
import { AppError } from '../errors.js';
import { canonicalQuery, focalCrop, focalOfContent, parseRenditionQuery, parseRenditionsConfig, resolveFormat } from './renditions.js';

const named = parseRenditionsConfig({ thumb: { w: 100, h: 100, fit: 'cover', fm: 'auto' } });
const parse = (q: string) => parseRenditionQuery(new URLSearchParams(q), named);
const badParam = (q: string): unknown => {
  try {
    parse(q);
  } catch (e) {
    expect(e).to.be.instanceOf(AppError);
    expect((e as AppError).http).to.equal(400);
    return (e as AppError).extraInfo.parameter;
  }
  throw new Error(`${q} was accepted`);
};

describe('rendition parameters (CONTRACT §17, pure rule)', () => {
  it('no rendition parameter: no rendition (other parameters are not ours)', () => {
    expect(parse('')).to.equal(null);
    expect(parse('foo=1&sig=x')).to.equal(null);
  });

  it('parses every parameter and defaults fit to inside', () => {
    const r = parse('w=200&h=100&fm=webp&q=80&focal=0.25,1');
    expect(r?.params).to.deep.equal({ w: 200, h: 100, fit: 'inside', fm: 'webp', q: 80, focal: [0.25, 1] });
    expect(r?.name).to.equal(null);
  });

  it('canonical query: sorted, shortest numbers, one per spelling', () => {
    expect(parse('w=0200&fm=webp&focal=.50,1.0')?.canonical).to.equal('fm=webp&focal=0.5,1&w=200');
    expect(parse('focal=0.5,1&w=200&fm=webp')?.canonical).to.equal('fm=webp&focal=0.5,1&w=200');
    expect(parse('fit=cover&w=1')?.canonical).to.equal('fit=cover&w=1');
    expect(canonicalQuery({ fit: 'inside', w: 5 })).to.equal('fit=inside&w=5');
  });

  it('refuses bad values naming the parameter', () => {
    expect(badParam('w=0')).to.equal('w');
    expect(badParam('w=4097')).to.equal('w');
    expect(badParam('w=1.5')).to.equal('w');
    expect(badParam('h=-1')).to.equal('h');
    expect(badParam('h=1e3')).to.equal('h');
    expect(badParam('fit=crop')).to.equal('fit');
    expect(badParam('fm=gif')).to.equal('fm');
    expect(badParam('q=0')).to.equal('q');
    expect(badParam('q=101')).to.equal('q');
    expect(badParam('focal=0.5')).to.equal('focal');
    expect(badParam('focal=1.1,0')).to.equal('focal');
    expect(badParam('focal=a,b')).to.equal('focal');
    expect(badParam('w=1&w=2')).to.equal('w');
    expect(badParam('rendition=nope')).to.equal('rendition');
    expect(badParam('rendition=thumb&w=5')).to.equal('w');
    expect(badParam('rendition=__proto__')).to.equal('rendition');
  });

  it('accepts the bounds', () => {
    expect(parse('w=1&h=4096&q=1')?.params).to.include({ w: 1, h: 4096, q: 1 });
    expect(parse('q=100&focal=0,1')?.params.focal).to.deep.equal([0, 1]);
  });

  it('named renditions come from the configuration, unsigned', () => {
    const r = parse('rendition=thumb');
    expect(r).to.deep.equal({ params: { w: 100, h: 100, fit: 'cover', fm: 'auto' }, name: 'thumb', canonical: '' });
  });

  it('the configuration is checked', () => {
    expect(() => parseRenditionsConfig({ x: { w: 0 } })).to.throw(/w/);
    expect(() => parseRenditionsConfig({ x: { crop: 1 } })).to.throw();
    expect(() => parseRenditionsConfig({ 'a b': {} })).to.throw();
  });

  it('fm=auto chooses from Accept; otherwise the source format, else JPEG', () => {
    expect(resolveFormat('auto', 'image/avif,image/webp,*/*', 'jpeg')).to.equal('avif');
    expect(resolveFormat('auto', 'image/webp,*/*', 'jpeg')).to.equal('webp');
    expect(resolveFormat('auto', 'image/avif;q=0, image/webp', 'jpeg')).to.equal('webp');
    expect(resolveFormat('auto', '*/*', 'png')).to.equal('png');
    expect(resolveFormat('auto', undefined, 'gif')).to.equal('jpeg');
    expect(resolveFormat(undefined, 'image/avif', 'png')).to.equal('png');
    expect(resolveFormat('webp', 'image/avif', 'png')).to.equal('webp');
  });

  it('focal point of the content: svcImage.focalPoint, checked', () => {
    expect(focalOfContent({ focalPoint: { x: 0.2, y: 0.9 } })).to.deep.equal([0.2, 0.9]);
    expect(focalOfContent({ focalPoint: { x: 2, y: 0 } })).to.equal(undefined);
    expect(focalOfContent({ focalPoint: 'left' })).to.equal(undefined);
    expect(focalOfContent(undefined)).to.equal(undefined);
  });

  it('focal crop: centred on the point as far as the edges let', () => {
    // 400x100 to 100x100: scaled to 400x100, window 100 wide.
    expect(focalCrop(400, 100, 100, 100, [0, 0.5])).to.deep.equal({ resizeWidth: 400, resizeHeight: 100, left: 0, top: 0 });
    expect(focalCrop(400, 100, 100, 100, [1, 0.5])).to.deep.equal({ resizeWidth: 400, resizeHeight: 100, left: 300, top: 0 });
    expect(focalCrop(400, 100, 100, 100, [0.5, 0.5])).to.deep.equal({ resizeWidth: 400, resizeHeight: 100, left: 150, top: 0 });
    expect(focalCrop(800, 200, 100, 100, [0.75, 0.5]).left).to.equal(250);
  });
});
