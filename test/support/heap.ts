import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;

/** Memory still in use after a full collection: the JS heap and the buffers outside it. */
export function retainedBytes(): number {
  collect();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
