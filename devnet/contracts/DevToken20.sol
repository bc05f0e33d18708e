// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title DevToken20: a minimal ERC-20 for the gapless devnet.
/// @notice Anyone may mint: this token exists only to produce test traffic on a local chain.
///         transferMany emits several Transfer logs from one transaction.
contract DevToken20 {
    string public constant name = "Gapless Dev Token";
    string public constant symbol = "GDT";
    uint8 public constant decimals = 18;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    function mint(address to, uint256 value) external {
        require(to != address(0), "DevToken20: mint to zero");
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            require(allowed >= value, "DevToken20: allowance too low");
            allowance[from][msg.sender] = allowed - value;
        }
        _move(from, to, value);
        return true;
    }

    /// Sends values[i] to to[i] for every i, one Transfer log each, in order.
    function transferMany(address[] calldata to, uint256[] calldata values) external returns (bool) {
        require(to.length == values.length, "DevToken20: length mismatch");
        for (uint256 i = 0; i < to.length; ++i) {
            _move(msg.sender, to[i], values[i]);
        }
        return true;
    }

    function _move(address from, address to, uint256 value) private {
        require(to != address(0), "DevToken20: transfer to zero");
        uint256 balance = balanceOf[from];
        require(balance >= value, "DevToken20: balance too low");
        unchecked {
            balanceOf[from] = balance - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
