"""The turn path: one accepted message to one delivered reply.

Why a room of its own: accepting a message durably (`accepted`), keeping one chat's turns
in order (`ordering`, `fairness`), pacing people (`ratelimit`, `window`), deciding whether a
group message is for the bot (`triggers`), answering it (`processor`), streaming the reply
(`streaming`), sending everything through one door (`delivery`) and picking up what a dead
process left (`recovery`) are one job: the engines in core/ (context, llm, tools, media)
are what it calls.
"""
