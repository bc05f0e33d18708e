#!/usr/bin/env python3
"""Writes seed inputs for decode_fuzz from the shared fixtures (see decode_fuzz.cc for the layout).

Usage: make_seeds.py <fixtures dir> <output dir>
Seeds are kept small (libFuzzer mutates small inputs much faster): mainnet 17000000 is cut down
to a few transactions that carry ERC-20, ERC-721 and ERC-1155 logs, renumbered consistently.
"""
import json
import os
import sys

fixtures, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
SINGLE = "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62"


def dump(value):
    return json.dumps(value, separators=(",", ":")).encode()


def write(name, *parts):
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"\0".join(p if isinstance(p, bytes) else dump(p) for p in parts))


def load(path):
    with open(os.path.join(fixtures, path)) as f:
        return json.load(f)


def io_result(path):
    with open(os.path.join(fixtures, path)) as f:
        for line in f:
            if line.startswith("<< "):
                return json.loads(line[3:]).get("result")
    return None


# Mainnet 17000000, cut to transactions with interesting logs.
block = load("mainnet/17000000/block.json")
receipts = load("mainnet/17000000/receipts.json")
picked, kinds = [], set()
for i, r in enumerate(receipts):
    k = set()
    for log in r["logs"]:
        t = log["topics"]
        if t and t[0] == TRANSFER:
            k.add("721" if len(t) == 4 else "20")
        if t and t[0] == SINGLE:
            k.add("1155")
    if k - kinds or (not r["logs"] and len(picked) < 1):
        picked.append(i)
        kinds |= k
    if len(picked) >= 5 and {"20", "721", "1155"} <= kinds:
        break
txs, rs, log_index = [], [], 0
for n, i in enumerate(picked):
    tx, r = dict(block["transactions"][i]), dict(receipts[i])
    tx["transactionIndex"] = r["transactionIndex"] = hex(n)
    r["logs"] = [dict(log) for log in r["logs"]]
    for log in r["logs"]:
        log["transactionIndex"] = hex(n)
        log["logIndex"] = hex(log_index)
        log_index += 1
    txs.append(tx)
    rs.append(r)
small = dict(block)
small["transactions"] = txs
write("mainnet-17000000-small", small, rs)

# execution-apis: full blocks with receipts, header-only blocks, single transactions.
apis = "execution-apis/tests/"
write("apis-latest", io_result(apis + "eth_getBlockByNumber/get-latest.io"),
      io_result(apis + "eth_getBlockReceipts/get-block-receipts-latest.io"))
write("apis-block-1", io_result(apis + "eth_getBlockByHash/get-block-by-hash.io"),
      io_result(apis + "eth_getBlockReceipts/get-block-receipts-n.io"))
write("apis-genesis", io_result(apis + "eth_getBlockByNumber/get-genesis.io"), [])
for fork in ("london", "merge", "shanghai", "cancun", "prague"):
    write("apis-" + fork, io_result(apis + "eth_getBlockByNumber/get-block-%s-fork.io" % fork), [])
for tx_file, receipt_file in (("get-legacy-tx", "get-legacy-receipt"),
                              ("get-legacy-create", "get-legacy-contract"),
                              ("get-access-list", "get-access-list"),
                              ("get-dynamic-fee", "get-dynamic-fee"),
                              ("get-blob-tx", "get-blob-tx"),
                              ("get-setcode-tx", "get-setcode-tx")):
    write("apis-tx-" + tx_file, io_result(apis + "eth_getTransactionByHash/%s.io" % tx_file),
          io_result(apis + "eth_getTransactionReceipt/%s.io" % receipt_file))
write("apis-block-number", io_result(apis + "eth_blockNumber/simple-test.io"), [])

# ethereum-etl: Parity-style block 483920 with its four receipts, and the genesis block.
etl = "ethereum-etl/tests/resources/"
b = load(etl + "test_export_blocks_job/block_with_logs/"
         "web3_response.eth_getBlockByNumber_0x76250_true.json")["result"]
rs = [load(etl + "test_export_receipts_job/receipts_with_logs/"
           "web3_response.eth_getTransactionReceipt_%s.json" % tx["hash"])["result"]
      for tx in b["transactions"]]
write("etl-483920", b, rs)
write("etl-genesis", load(etl + "test_export_blocks_job/block_without_transactions/"
                               "web3_response.eth_getBlockByNumber_0x0_true.json")["result"], [])


# Token logs (third part): selector byte + ABI data bytes.
def word(v):
    return v.to_bytes(32, "big")


batch = word(0x40) + word(0xA0) + word(2) + word(7) + word(8) + word(2) + word(100) + word(200)
write("log-batch", b"{}", b"[]", bytes([2]) + batch)
write("log-single", b"{}", b"[]", bytes([1]) + word(42) + word(1000))
write("log-erc20", b"{}", b"[]", bytes([0]) + word(5))
write("log-erc721", b"{}", b"[]", bytes([0x10]))
