// SPDX-License-Identifier: MIT
// Contracts whose events carry every type an ABI event can carry, for the contracts mode's
// decoding tests (issue 36, devnet/events.js): signed and odd-width integers, fixed and dynamic
// bytes, strings that are not UTF-8 or hold a NUL byte, fixed and dynamic arrays, nested tuples,
// indexed strings, arrays and tuples (stored as their topic hash), an anonymous event, an
// overloaded event, logs that do not fit their ABI, a factory whose children emit, and a token
// whose Transfer indexes its value.
pragma solidity ^0.8.20;

contract DevEvents {
  struct Inner {
    uint8 a;
    string s;
  }
  struct Outer {
    int256 x;
    Inner[] inners;
    bytes32[2] pair;
  }

  event Ints(int256 indexed neg, int24 tick, uint160 sqrtPriceX96, uint8 small, int64 i64,
             uint64 u64, int128 i128, uint256 big, uint48 u48, int8 i8);
  event Bytesy(bytes1 b1, bytes32 b32, bytes data, address indexed who, bool flag, bytes4 sel);
  event Strings(string indexed topicText, string text, bytes32 indexed tag);
  event Arrays(uint256[] nums, address[3] trio, string[] words, uint256[2][] pairs, int16[] small);
  event Tuples(Outer outer, Inner indexed inner, uint256 id);
  event IndexedArray(uint256[] indexed ids, uint8 n);
  event Anon(address indexed from, uint256 amount) anonymous;
  event Overloaded(uint256 a);
  event Overloaded(uint256 a, address b);
  event Unnamed(uint256, address, bool);

  function emitInts(int256 neg, int24 tick, uint160 price, uint8 small, int64 i64, uint64 u64,
                    int128 i128, uint256 big, uint48 u48, int8 i8) external {
    emit Ints(neg, tick, price, small, i64, u64, i128, big, u48, i8);
  }

  function emitBytes(bytes1 b1, bytes32 b32, bytes calldata data, address who, bool flag,
                     bytes4 sel) external {
    emit Bytesy(b1, b32, data, who, flag, sel);
  }

  // `raw` becomes the string as is: any bytes, so invalid UTF-8 and NUL bytes too.
  function emitStrings(bytes calldata raw, string calldata topicText, bytes32 tag) external {
    emit Strings(topicText, string(raw), tag);
  }

  function emitArrays(uint256[] calldata nums, address[3] calldata trio, string[] calldata words,
                      uint256[2][] calldata pairs, int16[] calldata small) external {
    emit Arrays(nums, trio, words, pairs, small);
  }

  function emitTuples(int256 x, uint8 a, string calldata s, uint256 id) external {
    Outer memory outer;
    outer.x = x;
    outer.inners = new Inner[](2);
    outer.inners[0] = Inner(a, s);
    outer.inners[1] = Inner(a + 1, string.concat(s, "!"));
    outer.pair[0] = keccak256(bytes(s));
    outer.pair[1] = bytes32(id);
    emit Tuples(outer, Inner(a, s), id);
  }

  function emitIndexedArray(uint256[] calldata ids) external {
    emit IndexedArray(ids, uint8(ids.length));
  }

  function emitAnon(uint256 amount) external {
    emit Anon(msg.sender, amount);
  }

  function emitOverloaded(uint256 a) external {
    emit Overloaded(a);
    emit Overloaded(a + 1, msg.sender);
  }

  function emitUnnamed(uint256 v) external {
    emit Unnamed(v, msg.sender, v % 2 == 0);
  }

  // A log of any shape: topics and data as given (logs that do not fit their ABI: a truncated
  // data part, a topic too many).
  function emitRaw(bytes32[] calldata topics, bytes calldata data) external {
    bytes memory d = data;
    uint256 n = topics.length;
    if (n == 0) {
      assembly { log0(add(d, 32), mload(d)) }
    } else if (n == 1) {
      bytes32 t0 = topics[0];
      assembly { log1(add(d, 32), mload(d), t0) }
    } else if (n == 2) {
      bytes32 t0 = topics[0];
      bytes32 t1 = topics[1];
      assembly { log2(add(d, 32), mload(d), t0, t1) }
    } else if (n == 3) {
      bytes32 t0 = topics[0];
      bytes32 t1 = topics[1];
      bytes32 t2 = topics[2];
      assembly { log3(add(d, 32), mload(d), t0, t1, t2) }
    } else {
      bytes32 t0 = topics[0];
      bytes32 t1 = topics[1];
      bytes32 t2 = topics[2];
      bytes32 t3 = topics[3];
      assembly { log4(add(d, 32), mload(d), t0, t1, t2, t3) }
    }
  }
}

// A pool a DevPoolFactory made: emits Swap and Mint.
contract DevPool {
  address public immutable token0;
  event Swap(address indexed sender, int256 amount0, int256 amount1, uint160 sqrtPriceX96,
             int24 tick);
  event Mint(address indexed owner, uint128 liquidity);

  constructor(address t0) {
    token0 = t0;
  }

  function swap(int256 amount0, int256 amount1, int24 tick) external {
    emit Swap(msg.sender, amount0, amount1, uint160(uint256(amount0 < 0 ? -amount0 : amount0)),
              tick);
  }

  function mint(uint128 liquidity) external {
    emit Mint(msg.sender, liquidity);
  }
}

// Makes pools and names each in PoolCreated(token0 indexed, pool, index).
contract DevPoolFactory {
  event PoolCreated(address indexed token0, address pool, uint256 index);
  uint256 public count;

  function create(address t0) external returns (address pool) {
    pool = address(new DevPool(t0));
    emit PoolCreated(t0, pool, count);
    count += 1;
  }
}

// A non-standard token whose Transfer indexes its value too (4 topics): a standard ERC-20 ABI
// does not fit its logs.
contract DevIndexedValueToken {
  event Transfer(address indexed from, address indexed to, uint256 indexed value);

  function transfer(address to, uint256 value) external returns (bool) {
    emit Transfer(msg.sender, to, value);
    return true;
  }
}
