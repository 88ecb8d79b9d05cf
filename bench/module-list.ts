/** `node --import dist/bench/module-list.js …`: registers `module-list-hooks.js` (see there). */
import { register } from 'node:module';

register('./module-list-hooks.js', import.meta.url);
