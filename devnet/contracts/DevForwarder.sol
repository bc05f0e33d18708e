// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title DevVault: a contract that accepts plain ETH payments and keeps them.
/// @notice The end of every DevForwarder route, so value moves contract-to-contract.
contract DevVault {
    receive() external payable {}
}

/// @title DevForwarder: internal value transfers (call frames with value below the top level).
/// @notice forward() pays a third of msg.value to an EOA and passes the rest along a route of
///         contracts, so value moves at trace depth 1, 2, 3...; attempt() sends value into a call
///         that reverts and ignores the failure, so a reverted internal transfer (whose value did
///         not move) sits in a successful transaction.
contract DevForwarder {
    /// Pays msg.value / 3 to `eoa`, then the rest to route[0]: as route[0].forward(eoa, route[1:])
    /// while the route goes on, as a plain payment (empty calldata) at its last hop.
    function forward(address payable eoa, address payable[] calldata route) external payable {
        require(route.length > 0, "DevForwarder: empty route");
        uint256 share = msg.value / 3;
        _pay(eoa, share);
        uint256 rest = msg.value - share;
        if (route.length > 1) {
            DevForwarder(route[0]).forward{value: rest}(eoa, route[1:]);
        } else {
            _pay(route[0], rest);
        }
    }

    /// Calls other.forwardAndRevert(eoa) with msg.value / 2 and catches its failure (that call
    /// always reverts, undoing its own payment to `eoa`), then pays the rest to `eoa`.
    /// (try/catch rather than a low-level call: solc then emits no MCOPY, so this also runs on
    /// an anvil started with --hardfork shanghai.)
    function attempt(address payable eoa, DevForwarder other) external payable {
        uint256 half = msg.value / 2;
        try other.forwardAndRevert{value: half}(eoa) {
            revert("DevForwarder: the inner call should have reverted");
        } catch {}
        _pay(eoa, msg.value - half);
    }

    /// Pays msg.value / 2 to `eoa`, then reverts: neither payment happens.
    function forwardAndRevert(address payable eoa) external payable {
        _pay(eoa, msg.value / 2);
        revert("DevForwarder: forwardAndRevert always reverts");
    }

    function _pay(address payable to, uint256 value) private {
        (bool ok, ) = to.call{value: value}("");
        require(ok, "DevForwarder: payment failed");
    }
}
