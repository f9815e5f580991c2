import { expect } from 'chai';
import { AppError } from '../errors.js';
import { rangeOf } from './byte-range.js';

/** The unit side of the Range cases in test/files/file-service.test.ts (RFC 9110 §14.1.2, spec "File service"). */
describe('byte ranges: one bytes= range of a Range header', () => {
  const unsatisfiable = (header: string, length: number) => {
    try {
      rangeOf(header, length);
    } catch (e) {
      expect(e).to.be.instanceOf(AppError);
      return [(e as AppError).http, (e as AppError).extraInfo.length];
    }
    return null;
  };

  it('first-last, open-ended and suffix ranges, inclusive, the end clipped to the file', () => {
    expect(rangeOf('bytes=0-3', 10)).to.deep.equal({ start: 0, end: 3 });
    expect(rangeOf('bytes=9-9', 10)).to.deep.equal({ start: 9, end: 9 });
    expect(rangeOf('bytes=5-', 10)).to.deep.equal({ start: 5, end: 9 });
    expect(rangeOf('bytes=0-100', 10)).to.deep.equal({ start: 0, end: 9 });
    expect(rangeOf('bytes=-3', 10)).to.deep.equal({ start: 7, end: 9 });
    expect(rangeOf('bytes=-100', 10), 'a suffix longer than the file is the whole file').to.deep.equal({ start: 0, end: 9 });
    expect(rangeOf('  bytes=1-2 ', 10), 'surrounding whitespace').to.deep.equal({ start: 1, end: 2 });
  });

  it('no header, several ranges, another unit or a malformed range: the whole file (null)', () => {
    for (const h of [undefined, 'bytes=0-1,5-6', 'items=0-1', 'bytes=-', 'bytes=', 'bytes= 1-2', 'bytes=a-b', 'Bytes=0-1', 'bytes=1-2-3']) {
      expect(rangeOf(h, 10), String(h)).to.equal(null);
    }
    expect(rangeOf('bytes=5-3', 10), 'last before first is invalid and ignored').to.equal(null);
  });

  it('416 with the file length when the range starts at or past the end, or is an empty suffix', () => {
    expect(unsatisfiable('bytes=10-', 10)).to.deep.equal([416, 10]);
    expect(unsatisfiable('bytes=10-20', 10)).to.deep.equal([416, 10]);
    expect(unsatisfiable('bytes=99999999999999999999-', 10)).to.deep.equal([416, 10]);
    expect(unsatisfiable('bytes=-0', 10)).to.deep.equal([416, 10]);
    expect(unsatisfiable('bytes=0-', 0), 'an empty file has no byte 0').to.deep.equal([416, 0]);
    expect(unsatisfiable('bytes=-5', 0)).to.deep.equal([416, 0]);
  });
});
