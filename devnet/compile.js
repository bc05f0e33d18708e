#!/usr/bin/env node
// compile.js: compiles devnet/contracts/*.sol with solc-js into devnet/build/<Contract>.json.
//
// Each output holds the contract's ABI, creation bytecode and method identifiers (selector per
// signature), which is all traffic.js needs. Outputs are generated, not committed: traffic.js calls
// ensureBuilt(), which recompiles only when a source or this file is newer than the outputs.
// Usage: node devnet/compile.js [--force] [--quiet]
'use strict';

const fs = require('fs');
const path = require('path');

const here = __dirname;
const sourceDir = path.join(here, 'contracts');
const buildDir = path.join(here, 'build');

// cancun: the oldest fork whose opcodes solc may use here (PUSH0, MCOPY), so the bytecode also
// runs on an anvil started with --hardfork cancun or prague.
const EVM_VERSION = 'cancun';

function sources() {
  return fs
    .readdirSync(sourceDir)
    .filter((f) => f.endsWith('.sol'))
    .sort()
    .map((f) => path.join(sourceDir, f));
}

function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

// Names of the contracts defined in a source (contract Foo ...), so staleness can be checked
// without running the compiler.
function contractNames(file) {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*contract\s+(\w+)/gm)].map((m) => m[1]);
}

function isStale() {
  const newestInput = Math.max(mtime(__filename), ...sources().map(mtime));
  for (const file of sources()) {
    for (const name of contractNames(file)) {
      if (mtime(path.join(buildDir, `${name}.json`)) < newestInput) return true;
    }
  }
  return false;
}

function compile({ quiet = false } = {}) {
  const solc = require('solc');
  const input = {
    language: 'Solidity',
    sources: {},
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: EVM_VERSION,
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.methodIdentifiers'] } },
    },
  };
  for (const file of sources()) {
    input.sources[path.basename(file)] = { content: fs.readFileSync(file, 'utf8') };
  }
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors || []).filter((e) => e.severity === 'error');
  for (const e of output.errors || []) {
    if (e.severity === 'error' || !quiet) process.stderr.write(e.formattedMessage + '\n');
  }
  if (errors.length > 0) throw new Error(`solc: ${errors.length} error(s)`);

  fs.mkdirSync(buildDir, { recursive: true });
  const written = [];
  for (const [sourceName, contracts] of Object.entries(output.contracts)) {
    for (const [name, c] of Object.entries(contracts)) {
      if (!c.evm.bytecode.object) continue; // interfaces have no bytecode
      const artifact = {
        contractName: name,
        sourceName,
        compiler: `solc-js ${solc.version()}`,
        evmVersion: EVM_VERSION,
        abi: c.abi,
        bytecode: '0x' + c.evm.bytecode.object,
        methodIdentifiers: c.evm.methodIdentifiers,
      };
      // Per process: two compiles at once (tests starting devnets side by side) must not rename
      // each other's half-written file.
      const tmp = path.join(buildDir, `.${name}.json.${process.pid}.tmp`);
      fs.writeFileSync(tmp, JSON.stringify(artifact, null, 2) + '\n');
      fs.renameSync(tmp, path.join(buildDir, `${name}.json`));
      written.push(name);
    }
  }
  return written;
}

// Compiles when an output is missing or older than its source; returns the artifacts by name.
function ensureBuilt({ force = false, quiet = true } = {}) {
  if (force || isStale()) compile({ quiet });
  const artifacts = {};
  for (const file of sources()) {
    for (const name of contractNames(file)) {
      artifacts[name] = JSON.parse(fs.readFileSync(path.join(buildDir, `${name}.json`), 'utf8'));
    }
  }
  return artifacts;
}

module.exports = { ensureBuilt, compile, buildDir };

if (require.main === module) {
  const args = process.argv.slice(2);
  const quiet = args.includes('--quiet');
  try {
    const start = Date.now();
    const names = compile({ quiet });
    if (!quiet) {
      const rel = path.relative(process.cwd(), buildDir) || '.';
      console.log(`compiled ${names.join(', ')} into ${rel}/ in ${Date.now() - start} ms`);
    }
  } catch (e) {
    console.error(`compile.js: ${e.message}`);
    process.exit(1);
  }
}
