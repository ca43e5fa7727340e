"""What the group missed: a recap of a chat's stored messages in one model request."""
