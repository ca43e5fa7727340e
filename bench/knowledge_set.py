"""The question set of bench/knowledge_bench.py: passages a community group would share
(server rules, patch notes, a club's schedule, a product manual, an FAQ) in Chinese and
English, and questions worded differently from their passage, plus exact names and ids.

Each passage key names its gold passage; the distractors share topics and words with the
passages so that keyword overlap alone is not enough.
"""

from __future__ import annotations

PASSAGES: dict[str, str] = {
    "ban": "本服务器严禁在游戏中使用外挂、加速器和自动脚本。"
    "一经发现，账号将被永久封禁，且不接受申诉。",
    "mute": "在群里刷屏或连续发送广告的成员会被禁言二十四小时，屡教不改者移出群聊。",
    "restart": "服务器每天凌晨四点自动重启维护，持续约十五分钟，期间无法登录。",
    "patch12": "1.2 版本更新：新增沙漠地图「赤砂谷」，"
    "修复了背包物品消失的问题，狙击枪伤害下调百分之十。",
    "event": "春节活动从二月一日持续到二月十五日，每天登录可领取红包，累计七天送限定坐骑。",
    "refund_zh": "充值后七天内未消费的点券可以申请退款，请联系客服并提供订单号。",
    "club_time": "读书会每周六下午两点在市图书馆三楼活动室见面，每次讨论一本书。",
    "club_fee": "读书会年费为一百二十元，学生凭学生证半价，费用用于购买书籍和茶点。",
    "pet": "宿舍楼内禁止饲养猫狗等宠物，违者将被通报批评并要求限期处理。",
    "wifi_zh": "办公室无线网络名称为 Office-5G，密码每月一日更换，请向前台索取。",
    "err4012": "Error ERR-4012 means the license server could not be reached. Check the firewall "
    "allows outbound port 8443, then restart the agent.",
    "reset_pw": "To change your password, open Settings, choose Security, and click Reset. A "
    "confirmation link is emailed to you and expires after 30 minutes.",
    "battery": "The X200 headset's battery lasts about 18 hours of playback; a full charge over "
    "USB-C takes two hours.",
    "warranty": "All devices carry a two-year limited warranty covering manufacturing defects. "
    "Water damage and drops are not covered.",
    "club_meet": "The chess club meets every Thursday at 6:30 pm in room 204 of the student "
    "union. Beginners are welcome; boards are provided.",
    "dues": "Membership dues are $25 per semester, payable to the treasurer, Maria Lopez, in "
    "cash or by bank transfer.",
    "raid": "Raid night is Friday at 21:00 server time. Bring flasks and repair your gear "
    "before the pull; late arrivals sit on the bench.",
    "patch_en": "Patch 3.4 removes the double-jump exploit, lowers the shotgun's range by 15%, "
    "and adds the Frozen Harbor map.",
    "sku": "The replacement ear cushions have part number SKU-88731 and fit both the X200 and "
    "the X300 models.",
    "shipping": "Orders ship within two business days. International delivery usually takes 7 "
    "to 14 days and tracking is sent by email.",
    "appeal": "If you think a ban was a mistake, file an appeal in the #appeals channel within "
    "14 days. Moderators answer within 72 hours.",
    "backup": "The wiki is backed up every night at 02:00 UTC to the offsite storage bucket "
    "named wiki-archive-eu.",
}

DISTRACTORS: list[str] = [
    "服务器的排行榜每周一更新，前十名可以获得专属称号。",
    "新玩家注册后会收到新手礼包，包含金币和初级装备。",
    "游戏内交易需要双方都在线，并且确认交易界面中的物品。",
    "公会战每两周举行一次，参赛公会需要至少十名成员。",
    "客服工作时间为工作日上午九点到下午六点。",
    "图书馆开放时间为早上八点到晚上十点，周一闭馆。",
    "宿舍每晚十一点熄灯，请大家注意作息时间。",
    "办公室打印机位于二楼走廊尽头，使用前需要刷卡。",
    "本群禁止讨论政治话题，请大家文明交流。",
    "地图编辑器将在下个版本开放给所有玩家试用。",
    "The leaderboard resets every Monday; the top ten get a badge.",
    "New members receive a welcome pack with stickers and a club t-shirt.",
    "The X300 headset adds active noise cancelling and a detachable microphone.",
    "Passwords must be at least 12 characters and include a number.",
    "The student union building is closed on public holidays.",
    "Our support team answers tickets Monday to Friday, 9 am to 6 pm.",
    "The treasurer publishes the club's accounts at the end of each semester.",
    "Server maintenance announcements are posted in the #news channel.",
    "The license agent logs to /var/log/agent.log; rotate it weekly.",
    "Gift cards cannot be refunded or exchanged for cash.",
    "Bring your own snacks to raid night; voice chat is mandatory.",
    "Shotgun skins from the winter event can be traded after patch 3.5.",
    "The chess club's spring tournament starts in April; sign up with the captain.",
    "Firewall rules are reviewed by the IT team every quarter.",
]

# (question, gold passage key)
QUESTIONS: list[tuple[str, str]] = [
    ("用挂会怎么样？", "ban"),
    ("开加速器被抓到会被封号吗", "ban"),
    ("在群里一直发广告有什么后果", "mute"),
    ("为什么每天早上四点登不上游戏", "restart"),
    ("新版本加了什么地图", "patch12"),
    ("狙击枪是不是被削弱了", "patch12"),
    ("过年活动什么时候结束", "event"),
    ("点券能退吗", "refund_zh"),
    ("读书会几点开始", "club_time"),
    ("读书会要交多少钱", "club_fee"),
    ("宿舍能养猫吗", "pet"),
    ("办公室 wifi 密码是多少", "wifi_zh"),
    ("赤砂谷", "patch12"),
    ("限定坐骑怎么拿", "event"),
    ("学生参加读书会有优惠吗", "club_fee"),
    ("What does ERR-4012 mean?", "err4012"),
    ("ERR-4012", "err4012"),
    ("I forgot my password, how do I set a new one?", "reset_pw"),
    ("How long does the X200 run on one charge?", "battery"),
    ("Is a broken screen from dropping it covered?", "warranty"),
    ("When does the chess club get together?", "club_meet"),
    ("How much does it cost to join the club?", "dues"),
    ("Who do I pay the membership fee to?", "dues"),
    ("What time is the raid on Friday?", "raid"),
    ("Was the shotgun nerfed in the last patch?", "patch_en"),
    ("SKU-88731", "sku"),
    ("Do the X300 ear pads fit the X200?", "sku"),
    ("How long until my order arrives abroad?", "shipping"),
    ("I was banned unfairly, what can I do?", "appeal"),
    ("Where are the wiki backups stored?", "backup"),
    ("Maria Lopez", "dues"),
    ("Frozen Harbor", "patch_en"),
    ("port 8443 blocked license", "err4012"),
    ("外挂", "ban"),
    ("游戏", "ban"),
    ("wiki-archive-eu", "backup"),
    ("耳机充满电要多久", "battery"),
    ("国外发货要几天", "shipping"),
    ("象棋俱乐部在哪里见面", "club_meet"),
    ("How do I get a refund for unused points?", "refund_zh"),
]

# Written after the language centering (core/knowledge/centering.py) was chosen on the
# questions above, and never used to choose anything: a check that it was not fitted to
# them. Half of them are asked in the other language than their passage.
HELD_OUT: list[tuple[str, str]] = [
    ("服务器维护的时候能玩吗", "restart"),
    ("被禁言多长时间", "mute"),
    ("读书会在哪个地方", "club_time"),
    ("养狗会被怎么处理", "pet"),
    ("Can I get my money back for points I never spent?", "refund_zh"),
    ("What new map came with version 1.2?", "patch12"),
    ("Is there a discount on the reading club fee for students?", "club_fee"),
    ("What is the office Wi-Fi called?", "wifi_zh"),
    ("How do I fix a license server connection error?", "err4012"),
    ("My headset got wet, will the warranty pay for it?", "warranty"),
    ("Which room is the chess club in?", "club_meet"),
    ("When are the wiki backups made?", "backup"),
    ("密码重置链接多久失效", "reset_pw"),
    ("周五团本几点开", "raid"),
    ("被封号了怎么申诉", "appeal"),
    ("霰弹枪射程改了多少", "patch_en"),
]
