/**
 * Turns at something costly, first come first: at most `atOnce` run, the next `waiting` wait
 * their turn, and `run` refuses past those (it throws what `refused` makes, before anything is
 * awaited). A turn that ends is handed to the first waiting, never left free between, so a run
 * that comes meanwhile cannot take it ahead of those that wait. The scrypt hashes of logins, the
 * searches a web process asks of the engine and the large version reads of file delivery take
 * their turns here.
 */
export class Turns {
  private running = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly atOnce: number,
    private readonly waiting = Number.POSITIVE_INFINITY,
  ) {}

  /** Runs `f` in a turn, at once or once one is handed over; past `waiting` waiting, throws `refused()`. */
  async run<T>(f: () => Promise<T>, refused?: () => Error): Promise<T> {
    if (this.running < this.atOnce) this.running++;
    else if (this.queue.length >= this.waiting) throw refused ? refused() : new Error('no turn free');
    else await new Promise<void>((go) => this.queue.push(go));
    try {
      return await f();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.running--;
    }
  }

  /** Turns running and waiting (tests, metrics). */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.queue.length };
  }
}
