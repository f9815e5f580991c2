import { expect } from 'chai';
import { pack, unpack } from '../adapters/codec.js';
import { AppError } from '../errors.js';
import { noActorInTime, pastDeadline, type CommandBase, type Reply } from './runtime.js';

/** The check of a command's deadline (security hunt F2), as the actors make it; test/actors/command-deadline.test.ts runs it end to end. */
describe('pastDeadline', () => {
  const cmd = (deadline?: unknown): CommandBase => ({ id: 'c1', cid: 'K', ...(deadline === undefined ? {} : { deadline: deadline as number }) });

  it('lets a command run until its deadline, the deadline itself included', () => {
    expect(pastDeadline(cmd(1000), 0)).to.equal(null);
    expect(pastDeadline(cmd(1000), 999)).to.equal(null);
    expect(pastDeadline(cmd(1000), 1000)).to.equal(null);
  });

  it('refuses it one millisecond later with the 503 the gateway answers on its own timeout, Retry-After 1', () => {
    const r = pastDeadline(cmd(1000), 1001, 3);
    expect(r).to.deep.equal({
      id: 'c1',
      ok: false,
      error: { code: 'UNAVAILABLE', message: 'No actor answered in time', extraInfo: { partition: 3 }, retryAfter: 1 },
    });
    expect(r!.ok ? null : r!.error).to.deep.equal(noActorInTime(3).toWire());
  });

  it('lets a command without a deadline run (appended by hand, or by a gateway of an earlier release)', () => {
    expect(pastDeadline(cmd(), Number.MAX_SAFE_INTEGER)).to.equal(null);
  });

  it('refuses a deadline that is not a number', () => {
    for (const bad of [null, 'soon', Number.NaN, {}, true]) expect(pastDeadline(cmd(bad), 0), String(bad)).to.not.equal(null);
  });

  it('keeps Retry-After across the wire (msgpack), so the gateway answers the actor refusal with it', () => {
    const reply = unpack<Reply>(pack(pastDeadline(cmd(1), 2)!));
    if (reply.ok) throw new Error('refused expected');
    const e = AppError.fromWire(reply.error);
    expect([e.http, e.statusCode, e.retryAfter]).to.deep.equal([503, '50300', 1]);
    // An error without one still has none.
    expect(AppError.fromWire(new AppError('CONTENT_MODIFIED').toWire()).retryAfter).to.equal(undefined);
    expect(new AppError('CONTENT_MODIFIED').toWire()).to.not.have.property('retryAfter');
  });
});
