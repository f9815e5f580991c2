import { expect } from 'chai';
import { applyUpdateMode, mergeValue } from './update-modes.js';

describe('update modes (spec: query parameter updateMode)', () => {
  const current = {
    a: { _type: 'a', title: 'old', tags: ['x'], nested: { k: 1, keep: true } },
    b: { _type: 'b', v: 1 },
  };

  it('update replaces aspects present and keeps absent ones', () => {
    const out = applyUpdateMode('update', current, { a: { _type: 'a', title: 'new' } });
    expect(out).to.deep.equal({ a: { _type: 'a', title: 'new' }, b: { _type: 'b', v: 1 } });
  });

  it('update removes an aspect sent as null', () => {
    expect(applyUpdateMode('update', current, { b: null })).to.not.have.property('b');
  });

  it('replace keeps exactly the aspects sent', () => {
    const out = applyUpdateMode('replace', current, { c: { _type: 'c' } });
    expect(out).to.deep.equal({ c: { _type: 'c' } });
  });

  it('merge appends lists, overwrites primitives and merges objects recursively', () => {
    const out = applyUpdateMode('merge', current, { a: { _type: 'a', title: 'new', tags: ['y'], nested: { k: 2 } } });
    expect(out.a).to.deep.equal({ _type: 'a', title: 'new', tags: ['x', 'y'], nested: { k: 2, keep: true } });
    expect(out.b).to.deep.equal(current.b);
  });

  it('merge adds an aspect the content did not have', () => {
    expect(applyUpdateMode('merge', current, { c: { _type: 'c', z: 1 } }).c).to.deep.equal({ _type: 'c', z: 1 });
  });

  it('merge does not change its inputs', () => {
    const before = JSON.stringify(current);
    applyUpdateMode('merge', current, { a: { tags: ['q'], nested: { k: 9 } } });
    expect(JSON.stringify(current)).to.equal(before);
  });

  it('mergeValue overwrites a list with an object and a primitive with a list', () => {
    expect(mergeValue([1], { a: 1 })).to.deep.equal({ a: 1 });
    expect(mergeValue(1, [1])).to.deep.equal([1]);
  });

  it('merge keeps a key __proto__ like any other (own keys, as JSON.parse makes them), and no prototype changes', () => {
    const patch = JSON.parse('{"a": {"__proto__": {"x": 1}}, "__proto__": {"y": 2}}');
    const out = mergeValue({ a: { b: 1 } }, patch) as Record<string, Record<string, unknown>>;
    expect(Object.hasOwn(out, '__proto__')).to.equal(true);
    expect(Object.getPrototypeOf(out)).to.equal(Object.prototype);
    expect(JSON.parse(JSON.stringify(out))).to.deep.equal(JSON.parse('{"a": {"b": 1, "__proto__": {"x": 1}}, "__proto__": {"y": 2}}'));
    // Merged into one the content already has: merged, not replaced.
    const again = mergeValue(out as unknown as Parameters<typeof mergeValue>[0], JSON.parse('{"__proto__": {"z": 3}}'));
    expect(JSON.stringify(again)).to.equal('{"a":{"b":1,"__proto__":{"x":1}},"__proto__":{"y":2,"z":3}}');
    expect(({} as Record<string, unknown>).x).to.equal(undefined);
  });
});
