import { Packr } from 'msgpackr';

/**
 * Binary inside, JSON outside: commands, replies, events and stored versions are msgpack.
 * Records are off so that every blob is plain MessagePack, readable by any decoder.
 */
const packr = new Packr({ useRecords: false, moreTypes: false });

export const pack = (value: unknown): Buffer => packr.pack(value);
export const unpack = <T>(buf: Buffer | Uint8Array): T => packr.unpack(buf) as T;
