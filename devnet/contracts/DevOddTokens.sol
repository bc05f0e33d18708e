// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title DevOdd20: the ERC-20 functions and events, without any metadata. Anyone may mint.
/// @notice The base of two tokens whose metadata is not what the standard says, as found on real
///         chains; their Transfer events are standard ERC-20 events.
abstract contract DevOdd20 {
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    function mint(address to, uint256 value) external {
        require(to != address(0), "DevOdd20: mint to zero");
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
            require(allowed >= value, "DevOdd20: allowance too low");
            allowance[from][msg.sender] = allowed - value;
        }
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) private {
        require(to != address(0), "DevOdd20: transfer to zero");
        uint256 balance = balanceOf[from];
        require(balance >= value, "DevOdd20: balance too low");
        unchecked {
            balanceOf[from] = balance - value;
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}

/// @title DevBytes32Token: name() and symbol() return bytes32, not string (like MKR and EOS).
contract DevBytes32Token is DevOdd20 {
    bytes32 public constant name = "Gapless Bytes32 Token";
    bytes32 public constant symbol = "GB32";
    uint8 public constant decimals = 9;
}

/// @title DevNoDecimalsToken: no decimals() at all, a name() that always reverts, a string symbol().
contract DevNoDecimalsToken is DevOdd20 {
    string public constant symbol = "GNODEC";

    function name() external pure returns (string memory) {
        revert("DevNoDecimalsToken: no name");
    }
}
