"""What model calls cost and who may still spend: `meter` records every call's tokens per
(day, chat, user, model, purpose); `quota` refuses a turn once a daily allowance is spent."""
