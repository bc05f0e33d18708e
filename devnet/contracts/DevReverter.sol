// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title DevReverter: produces failed transactions (receipt status 0) and plain, non-token logs.
/// @notice fail() emits a log and then reverts, so the log must not appear anywhere: a reverted
///         transaction's receipt has no logs. ping() succeeds and emits a log that is no token
///         transfer.
contract DevReverter {
    uint256 public pings;

    event Ping(address indexed sender, uint256 value);

    function ping(uint256 value) external {
        pings += 1;
        emit Ping(msg.sender, value);
    }

    function fail(uint256 value) external {
        pings += 1;
        emit Ping(msg.sender, value);
        revert("DevReverter: this call always fails");
    }

    function failSilently() external pure {
        revert();
    }
}
