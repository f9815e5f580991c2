import { pack } from './codec.js';

/** Node's Buffer writes UTF-8 without `write`'s argument checks (as msgpackr calls it). */
type Utf8Writable = Buffer & { utf8Write(s: string, offset: number, length: number): number };

/** Thrown inside `PackWriter.value` at a value `plain` does not write: the whole value goes to `pack` then. */
const NOT_PLAIN = Symbol('not plain');

/** The buffer a writer starts with. */
const START_BYTES = 64 * 1024;
/**
 * The largest buffer a writer keeps from one commit to the next. One grown past it for a large
 * commit (a string reserves 3 bytes a character: a body of 10 MiB grew it to 32 MiB) is let go
 * at the commit's end, not held for the life of the process.
 */
const KEPT_BYTES = 1024 * 1024;

/**
 * MessagePack written into one reused buffer, for the arguments of the commit scripts: a map of
 * names (`packScriptArgs`'s form) whose blobs are values packed in place, byte for byte what
 * `pack` (codec.ts) makes of them, instead of each packed into a buffer of its own and copied
 * into the arguments after. JSON values (strings, numbers, booleans, null, undefined, arrays and
 * objects of Object's constructor) are written here with msgpackr's own choices (the same
 * headers, the same integer and float forms, strings under 64 characters encoded as msgpackr's
 * loop does, longer ones by `utf8Write`); anything else (a Date, a Map, a Buffer, an object of
 * another class or none) is handed whole to `pack` and its bytes copied in. Five packs and the
 * copy of their buffers were a fifth of a bulk line's CPU (src/adapters/pack-writer.test.ts
 * checks the bytes against `pack` and `packScriptArgs`).
 *
 * One writer at a time: `begin` to `end` runs without awaiting, and `end` answers a copy.
 */
export class PackWriter {
  private buf = Buffer.allocUnsafeSlow(START_BYTES);
  private view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
  private pos = 0;
  private count = 0;
  /** The packed names (a str header and the name), made once. */
  private readonly names = new Map<string, Buffer>();

  /** Starts a map of script arguments (its header is written by `end`, when the count is known). */
  begin(): this {
    this.pos = 3; // room for a map16 header; a fixmap takes the last byte of it
    this.count = 0;
    return this;
  }

  /** The map written since `begin`, as a buffer of its own. */
  end(): Buffer {
    const b = this.buf;
    let from: number;
    if (this.count <= 15) {
      from = 2;
      b[2] = 0x80 | this.count;
    } else {
      from = 0;
      b[0] = 0xde;
      b[1] = this.count >> 8;
      b[2] = this.count & 0xff;
    }
    const out = Buffer.allocUnsafe(this.pos - from);
    b.copy(out, 0, from, this.pos);
    if (b.length > KEPT_BYTES) {
      this.buf = Buffer.allocUnsafeSlow(START_BYTES);
      this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
    }
    return out;
  }

  /** A string argument (UTF-8 as Buffer writes it); none when undefined. */
  str(name: string, v: string | undefined): this {
    if (v === undefined) return this;
    this.name(name);
    const n = Buffer.byteLength(v);
    this.room(n + 5);
    this.strHeader(n);
    this.pos += this.buf.write(v, this.pos);
    return this;
  }

  /** A number argument, as a float64 (Lua's number); none when undefined. */
  num(name: string, v: number | undefined): this {
    if (v === undefined) return this;
    this.name(name);
    this.room(9);
    this.buf[this.pos] = 0xcb;
    this.view.setFloat64(this.pos + 1, v);
    this.pos += 9;
    return this;
  }

  bool(name: string, v: boolean): this {
    this.name(name);
    this.room(1);
    this.buf[this.pos++] = v ? 0xc3 : 0xc2;
    return this;
  }

  /** A blob argument (bytes as a str); none when undefined. */
  blob(name: string, v: Buffer | undefined): this {
    if (v === undefined) return this;
    this.name(name);
    this.room(v.length + 5);
    this.strHeader(v.length);
    this.pos += v.copy(this.buf, this.pos);
    return this;
  }

  /** `blob(name, pack(value))`, packed in place; none when undefined. */
  packed(name: string, value: unknown): this {
    if (value === undefined) return this;
    this.name(name);
    this.packedStr(value);
    return this;
  }

  /** An array of `pack(value)` blobs. */
  packedList(name: string, values: readonly unknown[]): this {
    this.name(name);
    this.header(values.length, 0x90, 0xdc, 0xdd);
    for (const v of values) this.packedStr(v);
    return this;
  }

  private name(name: string): void {
    let b = this.names.get(name);
    if (!b) {
      const bytes = Buffer.from(name);
      if (bytes.length > 0xff) throw new Error(`script argument name too long: ${name.slice(0, 40)}`);
      b = Buffer.concat([Buffer.from(bytes.length <= 31 ? [0xa0 | bytes.length] : [0xd9, bytes.length]), bytes]);
      this.names.set(name, b);
    }
    this.room(b.length);
    this.pos += b.copy(this.buf, this.pos);
    this.count++;
  }

  /** The packed value as a str: its bytes after room for the longest header, then moved up to the header it takes. */
  private packedStr(value: unknown): void {
    const start = this.pos;
    this.room(5);
    this.pos += 5;
    const from = this.pos;
    try {
      this.value(value);
    } catch (e) {
      if (e !== NOT_PLAIN) throw e;
      this.pos = from;
      const b = pack(value);
      this.room(b.length);
      this.pos += b.copy(this.buf, this.pos);
    }
    const n = this.pos - from;
    this.pos = start;
    this.strHeader(n);
    if (this.pos !== from) this.buf.copyWithin(this.pos, from, from + n);
    this.pos += n;
  }

  /** A str header, its shortest form (fixstr, str8, str16, str32). */
  private strHeader(n: number): void {
    const b = this.buf;
    if (n <= 31) b[this.pos++] = 0xa0 | n;
    else if (n <= 0xff) {
      b[this.pos++] = 0xd9;
      b[this.pos++] = n;
    } else if (n <= 0xffff) {
      b[this.pos++] = 0xda;
      b[this.pos++] = n >> 8;
      b[this.pos++] = n & 0xff;
    } else {
      b[this.pos++] = 0xdb;
      this.view.setUint32(this.pos, n);
      this.pos += 4;
    }
  }

  /** An array or map header as msgpackr writes it (fix form under 16, then 16 and 32 bits). */
  private header(n: number, fix: number, code16: number, code32: number): void {
    this.room(5);
    const b = this.buf;
    if (n < 0x10) b[this.pos++] = fix | n;
    else if (n < 0x10000) {
      b[this.pos++] = code16;
      b[this.pos++] = n >> 8;
      b[this.pos++] = n & 0xff;
    } else {
      b[this.pos++] = code32;
      this.view.setUint32(this.pos, n);
      this.pos += 4;
    }
  }

  /** One value as msgpackr (codec.ts's options) writes it; NOT_PLAIN for what only `pack` writes. */
  private value(v: unknown): void {
    switch (typeof v) {
      case 'string':
        this.string(v);
        return;
      case 'number':
        this.number(v);
        return;
      case 'boolean':
        this.room(1);
        this.buf[this.pos++] = v ? 0xc3 : 0xc2;
        return;
      case 'undefined':
        // msgpackr's undefined: fixext 1 of type 0
        this.room(3);
        this.buf[this.pos++] = 0xd4;
        this.buf[this.pos++] = 0;
        this.buf[this.pos++] = 0;
        return;
      case 'object': {
        if (v === null) {
          this.room(1);
          this.buf[this.pos++] = 0xc0;
          return;
        }
        const c = v.constructor;
        if (c === Object) {
          const o = v as Record<string, unknown>;
          const keys = Object.keys(o);
          this.header(keys.length, 0x80, 0xde, 0xdf);
          for (let i = 0; i < keys.length; i++) {
            const k = keys[i];
            this.string(k);
            this.value(o[k]);
          }
          return;
        }
        if (c === Array) {
          const a = v as unknown[];
          const n = a.length;
          this.header(n, 0x90, 0xdc, 0xdd);
          for (let i = 0; i < n; i++) this.value(a[i]);
          return;
        }
        throw NOT_PLAIN;
      }
      default:
        throw NOT_PLAIN;
    }
  }

  /** A string as msgpackr writes it: under 64 characters by its own loop (a lone surrogate as three bytes), longer by utf8Write. */
  private string(s: string): void {
    const n = s.length;
    this.room(n * 3 + 5);
    const b = this.buf;
    const at = this.pos;
    if (n < 0x40) {
      const h = n < 0x20 ? 1 : 2;
      let p = at + h;
      for (let i = 0; i < n; i++) {
        let c = s.charCodeAt(i);
        if (c < 0x80) b[p++] = c;
        else if (c < 0x800) {
          b[p++] = (c >> 6) | 0xc0;
          b[p++] = (c & 0x3f) | 0x80;
        } else {
          const c2 = (c & 0xfc00) === 0xd800 ? s.charCodeAt(i + 1) : 0;
          if ((c2 & 0xfc00) === 0xdc00) {
            c = 0x10000 + ((c & 0x03ff) << 10) + (c2 & 0x03ff);
            i++;
            b[p++] = (c >> 18) | 0xf0;
            b[p++] = ((c >> 12) & 0x3f) | 0x80;
            b[p++] = ((c >> 6) & 0x3f) | 0x80;
            b[p++] = (c & 0x3f) | 0x80;
          } else {
            b[p++] = (c >> 12) | 0xe0;
            b[p++] = ((c >> 6) & 0x3f) | 0x80;
            b[p++] = (c & 0x3f) | 0x80;
          }
        }
      }
      const len = p - at - h;
      if (len < 0x20) {
        if (h !== 1) b.copyWithin(at + 1, at + h, p);
        b[at] = 0xa0 | len;
        this.pos = at + 1 + len;
      } else {
        if (h !== 2) b.copyWithin(at + 2, at + h, p);
        b[at] = 0xd9;
        b[at + 1] = len;
        this.pos = at + 2 + len;
      }
      return;
    }
    const h = n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
    const len = (b as Utf8Writable).utf8Write(s, at + h, b.length - at - h);
    const need = len < 0x100 ? 2 : len < 0x10000 ? 3 : 5;
    if (need !== h) b.copyWithin(at + need, at + h, at + h + len);
    if (need === 2) {
      b[at] = 0xd9;
      b[at + 1] = len;
    } else if (need === 3) {
      b[at] = 0xda;
      b[at + 1] = len >> 8;
      b[at + 2] = len & 0xff;
    } else {
      b[at] = 0xdb;
      this.view.setUint32(at + 1, len);
    }
    this.pos = at + need + len;
  }

  /** A number as msgpackr writes it: the smallest integer form for 32-bit integers, else a float64. */
  private number(v: number): void {
    this.room(9);
    const b = this.buf;
    if (v >>> 0 === v) {
      if (v < 0x80) b[this.pos++] = v;
      else if (v < 0x100) {
        b[this.pos++] = 0xcc;
        b[this.pos++] = v;
      } else if (v < 0x10000) {
        b[this.pos++] = 0xcd;
        b[this.pos++] = v >> 8;
        b[this.pos++] = v & 0xff;
      } else {
        b[this.pos++] = 0xce;
        this.view.setUint32(this.pos, v);
        this.pos += 4;
      }
    } else if (v >> 0 === v) {
      if (v >= -0x20) b[this.pos++] = 0x100 + v;
      else if (v >= -0x80) {
        b[this.pos++] = 0xd0;
        b[this.pos++] = v + 0x100;
      } else if (v >= -0x8000) {
        b[this.pos++] = 0xd1;
        this.view.setInt16(this.pos, v);
        this.pos += 2;
      } else {
        b[this.pos++] = 0xd2;
        this.view.setInt32(this.pos, v);
        this.pos += 4;
      }
    } else {
      b[this.pos++] = 0xcb;
      this.view.setFloat64(this.pos, v);
      this.pos += 8;
    }
  }

  /** Makes room for `n` more bytes (the buffer doubles; what is written stays). */
  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafeSlow(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
    this.view = new DataView(next.buffer, next.byteOffset, next.length);
  }
}
