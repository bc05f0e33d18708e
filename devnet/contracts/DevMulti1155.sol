// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

interface IERC1155Receiver {
    function onERC1155Received(address operator, address from, uint256 id, uint256 value, bytes calldata data)
        external
        returns (bytes4);

    function onERC1155BatchReceived(
        address operator,
        address from,
        uint256[] calldata ids,
        uint256[] calldata values,
        bytes calldata data
    ) external returns (bytes4);
}

/// @title DevMulti1155: a minimal ERC-1155 for the gapless devnet.
/// @notice Anyone may mint. Receiver hooks run only when the receiver is a contract; EOAs receive
///         directly. No URI and no metadata.
contract DevMulti1155 {
    mapping(address => mapping(uint256 => uint256)) private _balances;
    mapping(address => mapping(address => bool)) public isApprovedForAll;

    event TransferSingle(
        address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value
    );
    event TransferBatch(
        address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values
    );
    event ApprovalForAll(address indexed account, address indexed operator, bool approved);

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == 0x01ffc9a7 || interfaceId == 0xd9b67a26; // ERC-165, ERC-1155
    }

    function balanceOf(address account, uint256 id) external view returns (uint256) {
        return _balances[account][id];
    }

    function balanceOfBatch(address[] calldata accounts, uint256[] calldata ids)
        external
        view
        returns (uint256[] memory balances)
    {
        require(accounts.length == ids.length, "DevMulti1155: length mismatch");
        balances = new uint256[](accounts.length);
        for (uint256 i = 0; i < accounts.length; ++i) {
            balances[i] = _balances[accounts[i]][ids[i]];
        }
    }

    function setApprovalForAll(address operator, bool approved) external {
        isApprovedForAll[msg.sender][operator] = approved;
        emit ApprovalForAll(msg.sender, operator, approved);
    }

    function mint(address to, uint256 id, uint256 value) external {
        require(to != address(0), "DevMulti1155: mint to zero");
        _balances[to][id] += value;
        emit TransferSingle(msg.sender, address(0), to, id, value);
        _checkSingle(address(0), to, id, value, "");
    }

    function mintBatch(address to, uint256[] calldata ids, uint256[] calldata values) external {
        require(to != address(0), "DevMulti1155: mint to zero");
        require(ids.length == values.length, "DevMulti1155: length mismatch");
        for (uint256 i = 0; i < ids.length; ++i) {
            _balances[to][ids[i]] += values[i];
        }
        emit TransferBatch(msg.sender, address(0), to, ids, values);
        _checkBatch(address(0), to, ids, values, "");
    }

    function safeTransferFrom(address from, address to, uint256 id, uint256 value, bytes calldata data) external {
        _authorize(from, to);
        _debit(from, id, value);
        _balances[to][id] += value;
        emit TransferSingle(msg.sender, from, to, id, value);
        _checkSingle(from, to, id, value, data);
    }

    function safeBatchTransferFrom(
        address from,
        address to,
        uint256[] calldata ids,
        uint256[] calldata values,
        bytes calldata data
    ) external {
        _authorize(from, to);
        require(ids.length == values.length, "DevMulti1155: length mismatch");
        for (uint256 i = 0; i < ids.length; ++i) {
            _debit(from, ids[i], values[i]);
            _balances[to][ids[i]] += values[i];
        }
        emit TransferBatch(msg.sender, from, to, ids, values);
        _checkBatch(from, to, ids, values, data);
    }

    function _authorize(address from, address to) private view {
        require(to != address(0), "DevMulti1155: transfer to zero");
        require(from == msg.sender || isApprovedForAll[from][msg.sender], "DevMulti1155: not allowed");
    }

    function _debit(address from, uint256 id, uint256 value) private {
        uint256 balance = _balances[from][id];
        require(balance >= value, "DevMulti1155: balance too low");
        unchecked {
            _balances[from][id] = balance - value;
        }
    }

    function _checkSingle(address from, address to, uint256 id, uint256 value, bytes memory data) private {
        if (to.code.length > 0) {
            require(
                IERC1155Receiver(to).onERC1155Received(msg.sender, from, id, value, data) ==
                    IERC1155Receiver.onERC1155Received.selector,
                "DevMulti1155: receiver refused"
            );
        }
    }

    function _checkBatch(address from, address to, uint256[] calldata ids, uint256[] calldata values, bytes memory data)
        private
    {
        if (to.code.length > 0) {
            require(
                IERC1155Receiver(to).onERC1155BatchReceived(msg.sender, from, ids, values, data) ==
                    IERC1155Receiver.onERC1155BatchReceived.selector,
                "DevMulti1155: receiver refused"
            );
        }
    }
}
