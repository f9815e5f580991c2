import { AppError } from '../errors.js';

/**
 * One `bytes=` range of a Range header (RFC 9110 §14.1.2) over a file of `length` bytes, with
 * inclusive `start` and `end`; null to send the whole file (no header, several ranges, another
 * unit, or an invalid range, which RFC 9110 says to ignore); 416 when unsatisfiable.
 *
 * @example rangeOf('bytes=-100', 1000) // { start: 900, end: 999 }
 */
export function rangeOf(header: string | undefined, length: number): { start: number; end: number } | null {
  if (header === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null; // several ranges or another unit: the whole file
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) throw unsatisfiable(length);
    start = Math.max(0, length - suffix);
    end = length - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? length - 1 : Math.min(Number(m[2]), length - 1);
    if (m[2] !== '' && Number(m[2]) < start) return null; // invalid: ignored, as RFC 9110 says
  }
  if (start >= length) throw unsatisfiable(length);
  return { start, end };
}

const unsatisfiable = (length: number) => new AppError('RANGE_NOT_SATISFIABLE', `Range not satisfiable: the file has ${length} bytes`, { length });
