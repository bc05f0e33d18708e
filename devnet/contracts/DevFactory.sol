// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title DevChild: what DevFactory deploys. Holds the ETH sent to its constructor; its factory
///        (the owner) may make it self-destruct.
contract DevChild {
    address public immutable owner;

    constructor() payable {
        owner = msg.sender;
    }

    receive() external payable {}

    /// SELFDESTRUCT, sending the whole balance (msg.value included) to `beneficiary`. Since Cancun
    /// (EIP-6780) this deletes the contract only when it was created in the same transaction;
    /// otherwise it only sends the balance and the code stays.
    function destroy(address payable beneficiary) external payable {
        require(msg.sender == owner, "DevChild: not the owner");
        selfdestruct(beneficiary);
    }
}

/// @title DevFactory: contracts created by a contract, with CREATE and CREATE2, with and without
///        value, and self-destructed in the same or a later transaction.
contract DevFactory {
    event Created(address indexed child, bool create2);

    /// CREATE: the child's address follows from this factory's nonce.
    function deploy() external payable returns (DevChild child) {
        child = new DevChild{value: msg.value}();
        emit Created(address(child), false);
    }

    /// CREATE2: the child's address is keccak256(0xff ++ this ++ salt ++ keccak256(DevChild's
    /// creation code))[12:].
    function deploy2(bytes32 salt) external payable returns (DevChild child) {
        child = new DevChild{salt: salt, value: msg.value}();
        emit Created(address(child), true);
    }

    /// Creates a child (CREATE2 with `salt` or CREATE) holding msg.value and makes it
    /// self-destruct in the same transaction: its code is deleted and its balance goes to
    /// `beneficiary`.
    function deployAndDestroy(bytes32 salt, bool useCreate2, address payable beneficiary) external payable {
        DevChild child = useCreate2 ? new DevChild{salt: salt, value: msg.value}() : new DevChild{value: msg.value}();
        emit Created(address(child), useCreate2);
        child.destroy(beneficiary);
    }

    /// Makes an older child self-destruct, passing msg.value on to it first: the child's whole
    /// balance goes to `beneficiary`, the child's code stays (EIP-6780).
    function destroyChild(DevChild child, address payable beneficiary) external payable {
        child.destroy{value: msg.value}(beneficiary);
    }
}
