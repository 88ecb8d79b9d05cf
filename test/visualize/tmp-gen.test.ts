import { writeFileSync } from 'node:fs';
import { generateVisualizations, writeVisualizations } from '../../src/visualize/render.js';
import { toDot } from '../../src/visualize/dot.js';
import { walkMachine } from '../../src/visualize/walk.js';
import { DRAWN_MACHINES } from '../../src/visualize/registry.js';
it('gen', async () => { writeVisualizations('/tmp/vizout', await generateVisualizations()); for (const m of DRAWN_MACHINES) writeFileSync(`/tmp/vizout/${m.name}.dot`, toDot(walkMachine(m.machine))); });
