// The JSON5 file named on the command line as gtp2ogs's config loader reads it
// (src/config.ts: JSON5.parse of the file's text, json5 from the node_modules
// folder in GTP2OGS_MODULES), written to stdout as JSON.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.env.GTP2OGS_MODULES, "index.js"));
const JSON5 = require("json5");
process.stdout.write(JSON.stringify(JSON5.parse(readFileSync(process.argv[2], "utf8"))));
